// Gradient clipping: torch.nn.utils.clip_grad_norm_ / clip_grad_value_ (PyTorch 1.13).
#include <cmath>
#include <limits>
#include <string>

#include "tapegrad/optim/clip.h"

namespace tg {
namespace nn {
namespace utils {

namespace {
std::vector<Tensor> grads_of(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (const auto& p : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return std::to_string(v);
}
}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  if (!(norm_type > 0))
    throw ValueError("clip_grad_norm_: norm_type must be > 0 or inf, got " + num(norm_type));
  if (!(max_norm >= 0))
    throw ValueError("clip_grad_norm_: max_norm must be >= 0, got " + num(max_norm));
  const std::vector<Tensor> grads = grads_of(params);
  if (grads.empty()) return 0.0;

  // Each gradient's norm is rounded to float32, then the norm of those norms, as PyTorch
  // stacks float32 per-tensor norms. Sums run in double.
  float total;
  if (std::isinf(norm_type)) {
    total = 0.0f;
    for (const auto& g : grads) {
      const float* x = g.data_ptr();
      for (int64_t j = 0, n = g.numel(); j < n; ++j) {
        const float a = std::abs(x[j]);
        if (a > total || std::isnan(a)) total = a;  // NaN wins, as torch.max
        if (std::isnan(total)) break;
      }
    }
  } else {
    const double p = norm_type;
    auto pow_p = [p](double a) { return p == 2 ? a * a : p == 1 ? a : std::pow(a, p); };
    auto root_p = [p](double s) { return p == 2 ? std::sqrt(s) : p == 1 ? s : std::pow(s, 1 / p); };
    double sum_norms = 0;
    for (const auto& g : grads) {
      const float* x = g.data_ptr();
      double s = 0;
      for (int64_t j = 0, n = g.numel(); j < n; ++j) s += pow_p(std::abs(static_cast<double>(x[j])));
      const float norm = static_cast<float>(root_p(s));
      sum_norms += pow_p(norm);
    }
    total = static_cast<float>(root_p(sum_norms));
  }
  if (error_if_nonfinite && !std::isfinite(total))
    throw ValueError("clip_grad_norm_: the total norm of order " + num(norm_type) +
                     " of the gradients is " + num(total) +
                     ", so they cannot be clipped (pass error_if_nonfinite = false to scale them "
                     "anyway, as PyTorch does)");

  // coef = max_norm / (total + 1e-6), clamped to at most 1 (NaN stays NaN), in float32.
  float coef = static_cast<float>(max_norm) / (total + 1e-6f);
  if (coef > 1.0f) coef = 1.0f;
  for (const auto& g : grads) {
    float* x = g.data_ptr();
    for (int64_t j = 0, n = g.numel(); j < n; ++j) x[j] *= coef;
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  if (!(clip_value >= 0))
    throw ValueError("clip_grad_value_: clip_value must be >= 0, got " + num(clip_value));
  const float c = static_cast<float>(clip_value);
  for (const auto& g : grads_of(params)) {
    float* x = g.data_ptr();
    for (int64_t j = 0, n = g.numel(); j < n; ++j) {
      if (x[j] > c) x[j] = c;          // NaN compares false both ways and stays
      else if (x[j] < -c) x[j] = -c;
    }
  }
}

}  // namespace utils
}  // namespace nn
}  // namespace tg
