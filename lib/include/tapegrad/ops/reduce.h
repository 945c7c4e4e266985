#pragma once
// Reductions beyond sum, mean and max along one dim (tapegrad/ops.h): the extremes of a whole
// tensor, amax/amin, cumsum, logsumexp, var/std, norm and prod. As for sum, `dims` may be
// negative, an empty list reduces over every dim, and keepdim keeps them with size 1.
//
// Legend: x (...) -> (...) with the reduced dims removed (or 1 with keepdim).
#include <cstdint>
#include <vector>

#include "tapegrad/tensor.h"

namespace tg {

/// The largest element, 0-d (NaN if any is NaN). The gradient is split evenly among the
/// elements equal to it (ties), as torch.max(x) does.
Tensor max(const Tensor& x);
/// The smallest element, 0-d; ties share the gradient as in max(x).
Tensor min(const Tensor& x);
/// Max over dims, as torch.amax: ties share the gradient evenly.
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);

/// Running sum along dim: y[i] = x[0] + ... + x[i]. (...) -> (...), accumulated in double.
Tensor cumsum(const Tensor& x, int64_t dim);

/// log Σ exp(x) over dims, stable: m + log Σ exp(x - m), m the max (a row of -inf gives -inf).
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

/// Σ (x - mean)² / (n - 1) over dims (unbiased), or / n. With n = 1 and unbiased, 0/0 = NaN, as
/// PyTorch (which also warns).
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, bool unbiased = true,
           bool keepdim = false);
/// √var. Where the std is 0 its gradient is 0, as in PyTorch 1.13.
Tensor std(const Tensor& x, const std::vector<int64_t>& dims = {}, bool unbiased = true,
           bool keepdim = false);

/// The vector p-norm over dims (all: the whole tensor seen as one vector), as
/// torch.linalg.vector_norm: (Σ |x|^p)^(1/p); p = INFINITY: max |x|; p = -INFINITY: min |x|;
/// p = 0: the count of nonzeros (no gradient). At a norm of 0 the gradient is 0 (p >= 1).
Tensor norm(const Tensor& x, double p = 2.0, const std::vector<int64_t>& dims = {},
            bool keepdim = false);

/// Product of every element, 0-d. The gradient Π_{k≠i} x_k is exact with zeros in x.
Tensor prod(const Tensor& x);
/// Product along one dim.
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace tg
