// Adam and AdamW: the update rules of torch.optim.Adam / AdamW (PyTorch 1.13, single-tensor
// path, not capturable), fused into one loop per parameter.
#include <algorithm>
#include <cmath>

#include "tapegrad/optim/adam.h"

#include "optim/kernels.h"

namespace tg {
namespace optim {

template <class D>
std::vector<std::pair<std::string, double>> AdamOptionsBase<D>::to_numbers() const {
  return {{"lr", this->lr_},
          {"beta1", beta1_},
          {"beta2", beta2_},
          {"eps", eps_},
          {"weight_decay", weight_decay_},
          {"amsgrad", amsgrad_ ? 1.0 : 0.0},
          {"maximize", maximize_ ? 1.0 : 0.0}};
}

template <class D>
void AdamOptionsBase<D>::set_number(const std::string& name, double v) {
  if (name == "lr") this->lr_ = v;
  else if (name == "beta1") beta1_ = v;
  else if (name == "beta2") beta2_ = v;
  else if (name == "eps") eps_ = v;
  else if (name == "weight_decay") weight_decay_ = v;
  else if (name == "amsgrad") amsgrad_ = v != 0;
  else if (name == "maximize") maximize_ = v != 0;
  else
    throw ValueError(std::string(this->optimizer_name()) + " has no option '" + name +
                     "' (options: lr, beta1, beta2, eps, weight_decay, amsgrad, maximize)");
}

template <class D>
void AdamOptionsBase<D>::validate() const {
  auto nonneg = [](const char* name, double v) {
    if (!(v >= 0) || std::isinf(v))
      throw ValueError(std::string("invalid ") + name + " " + std::to_string(v) + ", expected a finite value >= 0");
  };
  nonneg("lr", this->lr_);
  nonneg("eps", eps_);
  nonneg("weight_decay", weight_decay_);
  if (!(beta1_ >= 0 && beta1_ < 1))
    throw ValueError("invalid beta1 " + std::to_string(beta1_) + ", expected in [0, 1)");
  if (!(beta2_ >= 0 && beta2_ < 1))
    throw ValueError("invalid beta2 " + std::to_string(beta2_) + ", expected in [0, 1)");
}

template struct AdamOptionsBase<AdamOptions>;
template struct AdamOptionsBase<AdamWOptions>;

namespace {

template <class O>
void adam_state_names(const OptimizerOptions& options, std::vector<std::string>& numbers,
                      std::vector<std::string>& tensors) {
  numbers.push_back("step");
  tensors.push_back("exp_avg");
  tensors.push_back("exp_avg_sq");
  if (static_cast<const O&>(options).amsgrad_) tensors.push_back("max_exp_avg_sq");
}

/// The shared update; `decoupled` selects AdamW's weight decay.
template <class O>
void adam_update(const O& o, bool decoupled, const Tensor& param, ParamState& state) {
  const Tensor grad = param.grad();
  const int64_t n = param.numel();
  if (state.empty()) {
    state.numbers["step"] = 0;
    state.tensors["exp_avg"] = zeros(param.shape());
    state.tensors["exp_avg_sq"] = zeros(param.shape());
  }
  if (o.amsgrad_ && !state.tensors["max_exp_avg_sq"].defined())  // amsgrad switched on later
    state.tensors["max_exp_avg_sq"] = zeros(param.shape());
  if (!o.amsgrad_) state.tensors.erase("max_exp_avg_sq");  // the state always fits the options
  const double step = (state.numbers["step"] += 1);
  float* p = param.data_ptr();
  const float* g = grad.data_ptr();
  float* m = state.tensors.at("exp_avg").data_ptr();
  float* v = state.tensors.at("exp_avg_sq").data_ptr();
  float* vmax = o.amsgrad_ ? state.tensors.at("max_exp_avg_sq").data_ptr() : nullptr;

  // Scalars in double, as Python computes them; rounded to float32 where ATen does.
  const double bias_correction1 = 1 - std::pow(o.beta1_, step);
  const double bias_correction2 = 1 - std::pow(o.beta2_, step);
  const float neg_step_size = static_cast<float>(-(o.lr_ / bias_correction1));
  const float bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float b1 = static_cast<float>(o.beta1_), one_m_b1 = static_cast<float>(1 - o.beta1_);
  const float b2 = static_cast<float>(o.beta2_), one_m_b2 = static_cast<float>(1 - o.beta2_);
  const float eps = static_cast<float>(o.eps_);
  const float wd = static_cast<float>(o.weight_decay_);
  const float decay = static_cast<float>(1 - o.lr_ * o.weight_decay_);
  const bool l2 = !decoupled && o.weight_decay_ != 0;

  detail::with_flags(
      [&](auto maximize, auto decoupled_wd, auto l2_wd, auto amsgrad) {
        detail::for_range(n, [=](int64_t begin, int64_t end) {  // by value: no aliasing
          for (int64_t j = begin; j < end; ++j) {
            float gj = maximize ? -g[j] : g[j];
            if constexpr (decoupled_wd) p[j] = p[j] * decay;             // AdamW: p ← p·(1 − lr·wd)
            if constexpr (l2_wd) gj = detail::add_scaled(gj, wd, p[j]);  // Adam:  g ← g + wd·p
            m[j] = detail::add_scaled(m[j] * b1, one_m_b1, gj);          // m ← β1·m + (1 − β1)·g
            v[j] = detail::add_product(v[j] * b2, one_m_b2, gj, gj);     // v ← β2·v + (1 − β2)·g²
            float vj = v[j];
            if constexpr (amsgrad)  // NaN-propagating max
              vj = vmax[j] = (v[j] > vmax[j] || std::isnan(v[j])) ? v[j] : vmax[j];
            const float denom = std::sqrt(vj) / bc2_sqrt + eps;
            p[j] = p[j] + neg_step_size * m[j] / denom;  // p ← p − step_size·m / denom
          }
        });
      },
      o.maximize_, decoupled, l2, vmax != nullptr);
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults) : Optimizer("Adam", defaults) {
  if (std::all_of(groups.begin(), groups.end(), [](const ParamGroup& g) { return g.params().empty(); }))
    throw ValueError("Adam: got an empty parameter list (no groups, or groups without parameters)");
  for (const auto& g : groups) add_param_group(g);
}

void Adam::state_names(const OptimizerOptions& options, std::vector<std::string>& numbers,
                       std::vector<std::string>& tensors) const {
  adam_state_names<AdamOptions>(options, numbers, tensors);
}

void Adam::update(const OptimizerOptions& options, const Tensor& param, ParamState& state) {
  adam_update(static_cast<const AdamOptions&>(options), false, param, state);
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& options)
    : AdamW(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& defaults)
    : Optimizer("AdamW", defaults) {
  if (std::all_of(groups.begin(), groups.end(), [](const ParamGroup& g) { return g.params().empty(); }))
    throw ValueError("AdamW: got an empty parameter list (no groups, or groups without parameters)");
  for (const auto& g : groups) add_param_group(g);
}

void AdamW::state_names(const OptimizerOptions& options, std::vector<std::string>& numbers,
                        std::vector<std::string>& tensors) const {
  adam_state_names<AdamWOptions>(options, numbers, tensors);
}

void AdamW::update(const OptimizerOptions& options, const Tensor& param, ParamState& state) {
  adam_update(static_cast<const AdamWOptions&>(options), true, param, state);
}

}  // namespace optim
}  // namespace tg
