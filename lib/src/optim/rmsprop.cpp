// RMSprop: the update rule of torch.optim.RMSprop (PyTorch 1.13, single-tensor path), fused
// into one loop per parameter.
#include <algorithm>
#include <cmath>

#include "tapegrad/optim/rmsprop.h"

#include "optim/kernels.h"

namespace tg {
namespace optim {

std::unique_ptr<OptimizerOptions> RMSpropOptions::clone() const {
  return std::make_unique<RMSpropOptions>(*this);
}

std::vector<std::pair<std::string, double>> RMSpropOptions::to_numbers() const {
  return {{"lr", lr_},
          {"alpha", alpha_},
          {"eps", eps_},
          {"weight_decay", weight_decay_},
          {"momentum", momentum_},
          {"centered", centered_ ? 1.0 : 0.0},
          {"maximize", maximize_ ? 1.0 : 0.0}};
}

void RMSpropOptions::set_number(const std::string& name, double v) {
  if (name == "lr") lr_ = v;
  else if (name == "alpha") alpha_ = v;
  else if (name == "eps") eps_ = v;
  else if (name == "weight_decay") weight_decay_ = v;
  else if (name == "momentum") momentum_ = v;
  else if (name == "centered") centered_ = v != 0;
  else if (name == "maximize") maximize_ = v != 0;
  else
    throw ValueError("RMSprop has no option '" + name +
                     "' (options: lr, alpha, eps, weight_decay, momentum, centered, maximize)");
}

void RMSpropOptions::validate() const {
  auto nonneg = [](const char* name, double v) {
    if (!(v >= 0) || std::isinf(v))
      throw ValueError(std::string("invalid ") + name + " " + std::to_string(v) + ", expected a finite value >= 0");
  };
  nonneg("lr", lr_);
  nonneg("alpha", alpha_);
  nonneg("eps", eps_);
  nonneg("weight_decay", weight_decay_);
  nonneg("momentum", momentum_);
}

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& options)
    : RMSprop(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& defaults)
    : Optimizer("RMSprop", defaults) {
  if (std::all_of(groups.begin(), groups.end(), [](const ParamGroup& g) { return g.params().empty(); }))
    throw ValueError("RMSprop: got an empty parameter list (no groups, or groups without parameters)");
  for (const auto& g : groups) add_param_group(g);
}

void RMSprop::state_names(const OptimizerOptions& options, std::vector<std::string>& numbers,
                          std::vector<std::string>& tensors) const {
  const auto& o = static_cast<const RMSpropOptions&>(options);
  numbers.push_back("step");
  tensors.push_back("square_avg");
  if (o.momentum_ > 0) tensors.push_back("momentum_buffer");
  if (o.centered_) tensors.push_back("grad_avg");
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
  float* buf = buffer("momentum_buffer", o.momentum_ > 0);
  float* gavg = buffer("grad_avg", o.centered_);
  state.numbers["step"] += 1;

  float* p = param.data_ptr();
  const float* g = grad.data_ptr();
  float* sq = state.tensors.at("square_avg").data_ptr();
  const float alpha = static_cast<float>(o.alpha_), one_m_alpha = static_cast<float>(1 - o.alpha_);
  const float eps = static_cast<float>(o.eps_);
  const float wd = static_cast<float>(o.weight_decay_);
  const float mom = static_cast<float>(o.momentum_);
  const float neg_lr = static_cast<float>(-o.lr_);
  const bool use_wd = o.weight_decay_ != 0;

  for (int64_t j = 0; j < n; ++j) {
    float gj = o.maximize_ ? -g[j] : g[j];
    if (use_wd) gj = detail::add_scaled(gj, wd, p[j]);     // g ← g + wd·p
    sq[j] = detail::add_product(sq[j] * alpha, one_m_alpha, gj, gj);  // s ← α·s + (1 − α)·g²
    float avg;
    if (gavg) {
      gavg[j] = detail::add_scaled(gavg[j] * alpha, one_m_alpha, gj);  // ḡ ← α·ḡ + (1 − α)·g
      avg = std::sqrt(detail::add_product(sq[j], -1.0f, gavg[j], gavg[j]));  // √(s − ḡ²)
    } else {
      avg = std::sqrt(sq[j]);
    }
    avg = avg + eps;
    if (buf) {
      buf[j] = buf[j] * mom + gj / avg;                    // b ← momentum·b + g / d
      p[j] = detail::add_scaled(p[j], neg_lr, buf[j]);
    } else {
      p[j] = p[j] + neg_lr * gj / avg;                     // p ← p − lr·g / d
    }
  }
}

}  // namespace optim
}  // namespace tg
