#pragma once
// Fused ops: several ops that usually follow each other, in one pass and one backward.
//
// Legend: R = rows (every dim but the normalized ones), N = prod(normalized_shape).
#include "tapegrad/tensor.h"

namespace tg {

/// Both outputs of add_layer_norm.
struct AddLayerNorm {
  Tensor sum;   ///< a + b (the residual stream)
  Tensor norm;  ///< layer_norm(a + b)
};

/// s = a + b and n = layer_norm(s, normalized_shape, weight, bias, eps) in one pass over the
/// rows, with one backward for both: a pre-LN transformer's residual add and the LayerNorm
/// after it. Equals add() then layer_norm() (the same rounding). a and b must have the same
/// shape (no broadcasting); weight and bias may be undefined. Its backward needs s as it was:
/// an in-place write to s before backward() is an error, as it is for layer_norm's input.
///   `auto [y, h] = tg::add_layer_norm(x, branch, {C}, w, b);`   (..., C) -> (..., C) twice
AddLayerNorm add_layer_norm(const Tensor& a, const Tensor& b, const Shape& normalized_shape,
                            const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                            float eps = 1e-5f);

}  // namespace tg
