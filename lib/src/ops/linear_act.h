#pragma once
// Library-internal, the ops layer: a Linear followed by its activation as one op
// (ops/matmul.cpp), for FeedForward. Not installed.
//
// OpenBLAS has no epilogue, so the fusion is around the GEMM: the bias goes into y before it
// (as tg::linear does), the activation runs in place over y once after it, and the backward
// applies act' to the incoming gradient in that gradient's own buffer before linear's three
// products. The values are tg::relu(tg::linear(...)) and tg::gelu(tg::linear(...)) bit for
// bit, gradients included.
#include "tapegrad/tensor.h"

namespace tg {
namespace detail {

/// The activation linear_act applies after the bias.
enum class Activation { None, Relu, Gelu };

/// act(x Wᵀ + b): (..., in), (out, in), (out) or undefined -> (..., out). Gelu is the exact
/// (erf) form, tg::gelu's default. Errors as tg::linear's, naming "linear_relu" /
/// "linear_gelu".
Tensor linear_act(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act);

}  // namespace detail
}  // namespace tg
