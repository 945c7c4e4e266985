#pragma once
// Creation ops beyond the factories of tapegrad/tensor.h (zeros, ones, full, arange, rand,
// randn), the triangle masks, and the comparisons of whole tensors (allclose, equal).
#include <cstdint>

#include "tapegrad/tensor.h"

namespace tg {

/// (n, m) with ones on the diagonal (m = -1: m = n).
Tensor eye(int64_t n, int64_t m = -1, bool requires_grad = false);
/// n evenly spaced values from start to end inclusive, by PyTorch's formula: the first half
/// counted from start, the second from end (start + i·step, end - (n-1-i)·step).
Tensor linspace(float start, float end, int64_t steps, bool requires_grad = false);
/// zeros(shape): tapegrad's empty() is zero-filled (PyTorch's holds whatever was in memory).
Tensor empty(const Shape& shape, bool requires_grad = false);
/// rand / randn / full in t's shape (from the global generator for the random ones).
Tensor rand_like(const Tensor& t, bool requires_grad = false);
Tensor randn_like(const Tensor& t, bool requires_grad = false);
Tensor full_like(const Tensor& t, float value, bool requires_grad = false);

/// The lower triangle of the last two dims: x[..., i, j] where j - i <= diagonal, else 0.
/// (..., N, M) -> (..., N, M); the gradient is masked the same way.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
/// The upper triangle: x[..., i, j] where j - i >= diagonal, else 0.
Tensor triu(const Tensor& x, int64_t diagonal = 0);

/// Whether |a - b| <= atol + rtol·|b| everywhere (a and b broadcast together); equal values
/// (infinities included) are close; NaN is close to NaN only when equal_nan.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
/// Whether a and b have the same shape and the same values (NaN equals nothing).
bool equal(const Tensor& a, const Tensor& b);

}  // namespace tg
