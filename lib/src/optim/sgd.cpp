// SGD: the update rule of torch.optim.SGD (PyTorch 1.13, single-tensor path), fused into one
// loop per parameter.
#include <algorithm>
#include <cmath>

#include "tapegrad/optim/sgd.h"

#include "optim/kernels.h"

namespace tg {
namespace optim {

std::vector<OptimizerOptions::Field> SGDOptions::fields() {
  return {{"lr", &lr_},
          {"momentum", &momentum_},
          {"dampening", &dampening_},
          {"weight_decay", &weight_decay_},
          {"nesterov", &nesterov_},
          {"maximize", &maximize_}};
}

void SGDOptions::validate() const {
  check_nonnegative("lr", lr_);
  check_nonnegative("momentum", momentum_);
  check_nonnegative("dampening", dampening_);
  check_nonnegative("weight_decay", weight_decay_);
  if (nesterov_ && (momentum_ <= 0 || dampening_ != 0))
    throw ValueError("nesterov momentum requires momentum > 0 and dampening 0, got momentum " +
                     std::to_string(momentum_) + ", dampening " + std::to_string(dampening_));
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : SGD(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults) : Optimizer("SGD", defaults) {
  add_param_groups(groups);
}

void SGD::state_names(const OptimizerOptions& options, std::vector<std::string>& numbers,
                      std::vector<std::string>& tensors) const {
  (void)numbers;
  if (static_cast<const SGDOptions&>(options).momentum() != 0) tensors.push_back("momentum_buffer");
}

void SGD::update(const OptimizerOptions& options, const Tensor& param, ParamState& state) {
  const auto& o = static_cast<const SGDOptions&>(options);
  const Tensor grad = param.grad();
  const int64_t n = param.numel();
  float* p = param.data_ptr();
  const float* g = grad.data_ptr();
  // Scalars are rounded to float32 as ATen does with Python numbers.
  const float wd = static_cast<float>(o.weight_decay());
  const float mom = static_cast<float>(o.momentum());
  const float keep = static_cast<float>(1.0 - o.dampening());
  const float neg_lr = static_cast<float>(-o.lr());
  const bool use_wd = o.weight_decay() != 0, use_mom = o.momentum() != 0;

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
      o.maximize(), use_wd, use_mom, use_mom && o.nesterov(), use_mom && first);
}

}  // namespace optim
}  // namespace tg
