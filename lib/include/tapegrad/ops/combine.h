#pragma once
// Combining and splitting tensors: stack, chunk, split, unbind (views), repeat, flip, roll.
// cat and expand are in tapegrad/ops.h.
#include <cstdint>
#include <vector>

#include "tapegrad/tensor.h"

namespace tg {

/// Joins equal-shaped tensors along a new dim: k × (...) -> (..., k at dim, ...).
/// unsqueeze + cat, so it works for whatever cat takes.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

/// `chunks` views of (nearly) equal size along dim: each ceil(n / chunks) long, the last
/// shorter; fewer than `chunks` when n is small (as PyTorch).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
/// Views of split_size along dim (the last shorter). A braced single size {k} also reads as
/// split_size k; use split_with_sizes for one explicit size.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
/// Views of the given sizes along dim; they must sum to the dim's size.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& split_sizes,
                                     int64_t dim = 0);
/// Every entry along dim as a view with that dim removed: (..., n, ...) -> n × (..., ...).
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);

/// Tiles x repeats[i] times along dim i; more repeats than dims add leading dims:
/// x (a, b), repeats (r0, r1, r2) -> (r0, r1·a, r2·b). Always a copy.
Tensor repeat(const Tensor& x, const Shape& repeats);
/// Reverses the order along each of dims (a copy, as PyTorch).
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);
/// Shifts elements along dims, wrapping around: y[(i + shift) mod n] = x[i]. With no dims,
/// rolls the flattened tensor (one shift) and restores the shape.
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims = {});
Tensor roll(const Tensor& x, int64_t shift, int64_t dim);

}  // namespace tg
