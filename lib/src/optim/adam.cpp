// Adam and AdamW: the update rules of torch.optim.Adam / AdamW (PyTorch 1.13, single-tensor
// path, not capturable), fused into one loop per parameter.
#include <algorithm>
#include <cmath>

#include "tapegrad/optim/adam.h"

#include "backend/vec.h"
#include "optim/kernels.h"

namespace tg {
namespace optim {

template <class D>
std::vector<OptimizerOptions::Field> AdamOptionsBase<D>::fields() {
  return {{"lr", &lr_},
          {"beta1", &betas_.first},
          {"beta2", &betas_.second},
          {"eps", &eps_},
          {"weight_decay", &weight_decay_},
          {"amsgrad", &amsgrad_},
          {"maximize", &maximize_}};
}

template <class D>
void AdamOptionsBase<D>::validate() const {
  this->check_nonnegative("lr", lr_);
  this->check_nonnegative("eps", eps_);
  this->check_nonnegative("weight_decay", weight_decay_);
  const auto [beta1, beta2] = betas_;
  if (!(beta1 >= 0 && beta1 < 1))
    throw ValueError("invalid beta1 " + std::to_string(beta1) + ", expected in [0, 1)");
  if (!(beta2 >= 0 && beta2 < 1))
    throw ValueError("invalid beta2 " + std::to_string(beta2) + ", expected in [0, 1)");
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
  if (static_cast<const O&>(options).amsgrad()) tensors.push_back("max_exp_avg_sq");
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
  if (o.amsgrad() && !state.tensors["max_exp_avg_sq"].defined())  // amsgrad switched on later
    state.tensors["max_exp_avg_sq"] = zeros(param.shape());
  if (!o.amsgrad()) state.tensors.erase("max_exp_avg_sq");  // the state always fits the options
  const double step = (state.numbers["step"] += 1);
  float* p = param.data_ptr();
  const float* g = grad.data_ptr();
  float* m = state.tensors.at("exp_avg").data_ptr();
  float* v = state.tensors.at("exp_avg_sq").data_ptr();
  float* vmax = o.amsgrad() ? state.tensors.at("max_exp_avg_sq").data_ptr() : nullptr;

  // Scalars in double, as Python computes them; rounded to float32 where ATen does.
  const double bias_correction1 = 1 - std::pow(o.betas().first, step);
  const double bias_correction2 = 1 - std::pow(o.betas().second, step);
  vec::AdamStep s;
  s.neg_step_size = static_cast<float>(-(o.lr() / bias_correction1));
  s.bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  s.b1 = static_cast<float>(o.betas().first);
  s.one_m_b1 = static_cast<float>(1 - o.betas().first);
  s.b2 = static_cast<float>(o.betas().second);
  s.one_m_b2 = static_cast<float>(1 - o.betas().second);
  s.eps = static_cast<float>(o.eps());
  s.wd = static_cast<float>(o.weight_decay());
  s.decay = static_cast<float>(1 - o.lr() * o.weight_decay());
  s.maximize = o.maximize();
  s.decoupled_wd = decoupled;                     // AdamW: p ← p·(1 − lr·wd)
  s.l2_wd = !decoupled && o.weight_decay() != 0;  // Adam:  g ← g + wd·p
  // m ← β1·m + (1 − β1)·g,  v ← β2·v + (1 − β2)·g²,  p ← p − step_size·m / (√v / √bc2 + eps)
  // (AMSGrad: v's running maximum in the denominator), in backend/vec_kernels.h.
  vec::kernels().adam(s, p, g, m, v, vmax, n);  // split across tapegrad's threads when large
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults) : Optimizer("Adam", defaults) {
  add_param_groups(groups);
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
  add_param_groups(groups);
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
