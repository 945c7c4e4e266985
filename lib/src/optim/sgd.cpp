// SGD: the update rule of torch.optim.SGD (PyTorch 1.13, single-tensor path), fused into one
// loop per parameter.
#include <algorithm>
#include <cmath>

#include "tapegrad/optim/sgd.h"

#include "optim/kernels.h"

namespace tg {
namespace optim {

std::unique_ptr<OptimizerOptions> SGDOptions::clone() const {
  return std::make_unique<SGDOptions>(*this);
}

std::vector<std::pair<std::string, double>> SGDOptions::to_numbers() const {
  return {{"lr", lr_},
          {"momentum", momentum_},
          {"dampening", dampening_},
          {"weight_decay", weight_decay_},
          {"nesterov", nesterov_ ? 1.0 : 0.0},
          {"maximize", maximize_ ? 1.0 : 0.0}};
}

void SGDOptions::set_number(const std::string& name, double v) {
  if (name == "lr") lr_ = v;
  else if (name == "momentum") momentum_ = v;
  else if (name == "dampening") dampening_ = v;
  else if (name == "weight_decay") weight_decay_ = v;
  else if (name == "nesterov") nesterov_ = v != 0;
  else if (name == "maximize") maximize_ = v != 0;
  else
    throw ValueError("SGD has no option '" + name +
                     "' (options: lr, momentum, dampening, weight_decay, nesterov, maximize)");
}

void SGDOptions::validate() const {
  auto nonneg = [](const char* name, double v) {
    if (!(v >= 0) || std::isinf(v))
      throw ValueError(std::string("invalid ") + name + " " + std::to_string(v) + ", expected a finite value >= 0");
  };
  nonneg("lr", lr_);
  nonneg("momentum", momentum_);
  nonneg("dampening", dampening_);
  nonneg("weight_decay", weight_decay_);
  if (nesterov_ && (momentum_ <= 0 || dampening_ != 0))
    throw ValueError("nesterov momentum requires momentum > 0 and dampening 0, got momentum " +
                     std::to_string(momentum_) + ", dampening " + std::to_string(dampening_));
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : SGD(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults) : Optimizer("SGD", defaults) {
  if (std::all_of(groups.begin(), groups.end(), [](const ParamGroup& g) { return g.params().empty(); }))
    throw ValueError("SGD: got an empty parameter list (no groups, or groups without parameters)");
  for (const auto& g : groups) add_param_group(g);
}

void SGD::state_names(const OptimizerOptions& options, std::vector<std::string>& numbers,
                      std::vector<std::string>& tensors) const {
  (void)numbers;
  if (static_cast<const SGDOptions&>(options).momentum_ != 0) tensors.push_back("momentum_buffer");
}

void SGD::update(const OptimizerOptions& options, const Tensor& param, ParamState& state) {
  const auto& o = static_cast<const SGDOptions&>(options);
  const Tensor grad = param.grad();
  const int64_t n = param.numel();
  float* p = param.data_ptr();
  const float* g = grad.data_ptr();
  // Scalars are rounded to float32 as ATen does with Python numbers.
  const float wd = static_cast<float>(o.weight_decay_);
  const float mom = static_cast<float>(o.momentum_);
  const float keep = static_cast<float>(1.0 - o.dampening_);
  const float neg_lr = static_cast<float>(-o.lr_);
  const bool use_wd = o.weight_decay_ != 0, use_mom = o.momentum_ != 0;

  float* buf = nullptr;
  bool first = false;
  if (use_mom) {
    Tensor& b = state.tensors["momentum_buffer"];
    first = !b.defined();
    if (first) b = zeros(param.shape());
    buf = b.data_ptr();
  } else {
    state.tensors.erase("momentum_buffer");  // the state always fits the options
  }
  detail::with_flags(
      [&](auto maximize, auto weight_decay, auto momentum, auto nesterov, auto first_step) {
        detail::for_range(n, [=](int64_t begin, int64_t end) {  // by value: no aliasing
          for (int64_t j = begin; j < end; ++j) {
            float d = maximize ? -g[j] : g[j];
            if constexpr (weight_decay) d = detail::add_scaled(d, wd, p[j]);  // d_p = d_p + wd·p
            if constexpr (momentum) {
              // The first step takes d_p itself as the buffer.
              buf[j] = first_step ? d : detail::add_scaled(buf[j] * mom, keep, d);
              d = nesterov ? detail::add_scaled(d, mom, buf[j]) : buf[j];
            }
            p[j] = detail::add_scaled(p[j], neg_lr, d);
          }
        });
      },
      o.maximize_, use_wd, use_mom, use_mom && o.nesterov_, use_mom && first);
}

}  // namespace optim
}  // namespace tg
