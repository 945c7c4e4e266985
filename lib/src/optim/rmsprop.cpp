// RMSprop: the update rule of torch.optim.RMSprop (PyTorch 1.13, single-tensor path), fused
// into one loop per parameter.
#include <algorithm>
#include <cmath>

#include "tapegrad/optim/rmsprop.h"

#include "optim/kernels.h"

namespace tg {
namespace optim {

std::vector<OptimizerOptions::Field> RMSpropOptions::fields() {
  return {{"lr", &lr_},
          {"alpha", &alpha_},
          {"eps", &eps_},
          {"weight_decay", &weight_decay_},
          {"momentum", &momentum_},
          {"centered", &centered_},
          {"maximize", &maximize_}};
}

void RMSpropOptions::validate() const {
  check_nonnegative("lr", lr_);
  check_nonnegative("alpha", alpha_);
  check_nonnegative("eps", eps_);
  check_nonnegative("weight_decay", weight_decay_);
  check_nonnegative("momentum", momentum_);
}

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& options)
    : RMSprop(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& defaults)
    : Optimizer("RMSprop", defaults) {
  add_param_groups(groups);
}

void RMSprop::state_names(const OptimizerOptions& options, std::vector<std::string>& numbers,
                          std::vector<std::string>& tensors) const {
  const auto& o = static_cast<const RMSpropOptions&>(options);
  numbers.push_back("step");
  tensors.push_back("square_avg");
  if (o.momentum() > 0) tensors.push_back("momentum_buffer");
  if (o.centered()) tensors.push_back("grad_avg");
}

void RMSprop::update(const OptimizerOptions& options, const Tensor& param, ParamState& state) {
  const auto& o = static_cast<const RMSpropOptions&>(options);
  const Tensor grad = param.grad();
  const int64_t n = param.numel();
  if (state.empty()) {
    state.numbers["step"] = 0;
    state.tensors["square_avg"] = zeros(param.shape());
  }
  // Buffers follow the options (created as zeros when an option is switched on, as PyTorch
  // does on the first step).
  auto buffer = [&](const char* name, bool on) -> float* {
    if (!on) {
      state.tensors.erase(name);
      return nullptr;
    }
    Tensor& t = state.tensors[name];
    if (!t.defined()) t = zeros(param.shape());
    return t.data_ptr();
  };
  float* buf = buffer("momentum_buffer", o.momentum() > 0);
  float* gavg = buffer("grad_avg", o.centered());
  state.numbers["step"] += 1;

  float* p = param.data_ptr();
  const float* g = grad.data_ptr();
  float* sq = state.tensors.at("square_avg").data_ptr();
  const float alpha = static_cast<float>(o.alpha()), one_m_alpha = static_cast<float>(1 - o.alpha());
  const float eps = static_cast<float>(o.eps());
  const float wd = static_cast<float>(o.weight_decay());
  const float mom = static_cast<float>(o.momentum());
  const float neg_lr = static_cast<float>(-o.lr());
  const bool use_wd = o.weight_decay() != 0;

  detail::with_flags(
      [&](auto maximize, auto weight_decay, auto centered, auto momentum) {
        detail::for_range(n, [=](int64_t begin, int64_t end) {  // by value: no aliasing
          for (int64_t j = begin; j < end; ++j) {
            float gj = maximize ? -g[j] : g[j];
            if constexpr (weight_decay) gj = detail::add_scaled(gj, wd, p[j]);  // g ← g + wd·p
            sq[j] = detail::add_product(sq[j] * alpha, one_m_alpha, gj, gj);  // s ← α·s + (1 − α)·g²
            float avg;
            if constexpr (centered) {
              gavg[j] = detail::add_scaled(gavg[j] * alpha, one_m_alpha, gj);  // ḡ ← α·ḡ + (1 − α)·g
              avg = std::sqrt(detail::add_product(sq[j], -1.0f, gavg[j], gavg[j]));  // √(s − ḡ²)
            } else {
              avg = std::sqrt(sq[j]);
            }
            avg = avg + eps;
            if constexpr (momentum) {
              buf[j] = buf[j] * mom + gj / avg;  // b ← momentum·b + g / d
              p[j] = detail::add_scaled(p[j], neg_lr, buf[j]);
            } else {
              p[j] = p[j] + neg_lr * gj / avg;  // p ← p − lr·g / d
            }
          }
        });
      },
      o.maximize(), use_wd, gavg != nullptr, buf != nullptr);
}

}  // namespace optim
}  // namespace tg
