// The activation modules of tapegrad/nn/activation.h: each checks its options once and calls
// its op.
#include "tapegrad/nn/activation.h"

#include <cmath>

#include "nn/format.h"
#include "tapegrad/ops.h"

namespace tg {
namespace nn {

Tensor SiLU::forward(const Tensor& x) { return silu(x); }

LeakyReLU::LeakyReLU(const LeakyReLUOptions& o) : UnaryModule("LeakyReLU"), options(o) {
  if (std::isnan(o.negative_slope())) value_error("negative_slope is NaN");
}
Tensor LeakyReLU::forward(const Tensor& x) { return leaky_relu(x, options.negative_slope()); }
std::string LeakyReLU::extra_repr() const {
  return "negative_slope=" + detail::format_float(options.negative_slope());
}

ELU::ELU(const ELUOptions& o) : UnaryModule("ELU"), options(o) {
  if (std::isnan(o.alpha())) value_error("alpha is NaN");
}
Tensor ELU::forward(const Tensor& x) { return elu(x, options.alpha()); }
std::string ELU::extra_repr() const { return "alpha=" + detail::format_float(options.alpha()); }

Softplus::Softplus(const SoftplusOptions& o) : UnaryModule("Softplus"), options(o) {
  if (!(o.beta() > 0.0f) || std::isinf(o.beta()))
    value_error("beta must be finite and > 0, got " + detail::format_float(o.beta()));
  if (std::isnan(o.threshold())) value_error("threshold is NaN");
}
Tensor Softplus::forward(const Tensor& x) { return softplus(x, options.beta(), options.threshold()); }
std::string Softplus::extra_repr() const {
  return "beta=" + detail::format_float(options.beta()) +
         ", threshold=" + detail::format_float(options.threshold());
}

}  // namespace nn
}  // namespace tg
