#pragma once
// More elementwise ops (float32), with PyTorch's definitions and gradients: (...) -> (...)
// unless said otherwise. The basic ones (exp, log, tanh, relu, gelu, ...) are in ops.h.
#include <optional>

#include "tapegrad/tensor.h"

namespace tg {

/// min(max(x, min), max); either bound may be left out (not both: tg::ValueError). Where
/// min > max every element becomes max, as in PyTorch. The gradient passes where
/// min <= x <= max (bounds included).
Tensor clamp(const Tensor& x, std::optional<float> min, std::optional<float> max = std::nullopt);
/// The same with tensor bounds, all three broadcast together; an undefined bound is left out
/// (not both). Gradients as PyTorch: min gets g where x < min < max, max where x > max or
/// max < min.
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max = Tensor());
Tensor clamp_min(const Tensor& x, float min);
Tensor clamp_max(const Tensor& x, float max);

Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
/// log(1 + x), accurate near 0.
Tensor log1p(const Tensor& x);
/// eˣ - 1, accurate near 0.
Tensor expm1(const Tensor& x);
/// 1 / x
Tensor reciprocal(const Tensor& x);
/// 1 / √x
Tensor rsqrt(const Tensor& x);

/// log(1 + e^(βx)) / β, and x itself where βx > threshold (PyTorch's definition). beta must
/// be > 0 (tg::ValueError).
Tensor softplus(const Tensor& x, float beta = 1.0f, float threshold = 20.0f);
/// x · sigmoid(x), also called swish.
Tensor silu(const Tensor& x);
/// x where x > 0, negative_slope · x elsewhere.
Tensor leaky_relu(const Tensor& x, float negative_slope = 0.01f);
/// x where x > 0, alpha · (eˣ - 1) elsewhere.
Tensor elu(const Tensor& x, float alpha = 1.0f);

// These are piecewise constant: their gradient is zero everywhere, as in PyTorch.
/// -1, 0 or 1 (0 for NaN, as PyTorch 1.13).
Tensor sign(const Tensor& x);
/// To the nearest integer, halves to even (round(2.5) = 2), as torch.round.
Tensor round(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);

/// base ** exponent elementwise, the two broadcast together (numpy rules). Gradients as
/// PyTorch: d/dbase is 0 where exponent == 0, d/dexponent is 0 where base == 0 and
/// exponent >= 0. (pow(Tensor, float) is in ops.h.)
Tensor pow(const Tensor& base, const Tensor& exponent);
/// base ** exponent for a scalar base.
Tensor pow(float base, const Tensor& exponent);

}  // namespace tg
