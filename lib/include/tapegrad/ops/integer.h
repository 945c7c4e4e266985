#pragma once
// Ops on int64 and bool tensors: comparisons (giving bool masks), logical ops, argmax/argmin,
// and the int64-tensor forms of the index ops. None of these is differentiable: their outputs
// never require a gradient. Comparisons broadcast like the arithmetic ops; an int64 (or bool)
// operand against a float one is compared as float32, as PyTorch promotes.
//
// Legend: N = rows, K = classes, V = vocabulary, C = channels, S = any shape.
#include <tuple>

#include "tapegrad/ops.h"
#include "tapegrad/tensor.h"

namespace tg {

// ---- comparisons: a bool tensor in the broadcast shape ---------------------------------------
Tensor gt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, double s);
Tensor lt(const Tensor& a, double s);
Tensor ge(const Tensor& a, double s);
Tensor le(const Tensor& a, double s);
Tensor eq(const Tensor& a, double s);
Tensor ne(const Tensor& a, double s);

inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator>(const Tensor& a, double s) { return gt(a, s); }
inline Tensor operator<(const Tensor& a, double s) { return lt(a, s); }
inline Tensor operator>=(const Tensor& a, double s) { return ge(a, s); }
inline Tensor operator<=(const Tensor& a, double s) { return le(a, s); }
inline Tensor operator==(const Tensor& a, double s) { return eq(a, s); }
inline Tensor operator!=(const Tensor& a, double s) { return ne(a, s); }
inline Tensor operator>(double s, const Tensor& a) { return lt(a, s); }
inline Tensor operator<(double s, const Tensor& a) { return gt(a, s); }
inline Tensor operator>=(double s, const Tensor& a) { return le(a, s); }
inline Tensor operator<=(double s, const Tensor& a) { return ge(a, s); }
inline Tensor operator==(double s, const Tensor& a) { return eq(a, s); }
inline Tensor operator!=(double s, const Tensor& a) { return ne(a, s); }

// ---- logical ops on bool tensors (an int64 or float operand counts as != 0) -------------------
Tensor logical_not(const Tensor& a);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
/// On bool tensors only (tg::TypeError otherwise), as LibTorch's operators on masks.
Tensor operator~(const Tensor& a);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);

// ---- argmax / argmin ---------------------------------------------------------------------------
/// The flat index (row-major) of the largest element: a 0-d int64 tensor. The first one wins
/// ties; NaN counts as the largest, as in PyTorch.
Tensor argmax(const Tensor& a);
/// Indices along `dim` (int64), the dim removed unless keepdim.
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& a);
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim = false);

// ---- masks and indices ----------------------------------------------------------------------
/// Whether every (any) element is nonzero: a 0-d bool tensor.
Tensor all(const Tensor& a);
Tensor any(const Tensor& a);
/// Along one dim (removed unless keepdim): a bool tensor.
Tensor all(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor any(const Tensor& a, int64_t dim, bool keepdim = false);
/// The indices of the nonzero elements, row-major: int64 (n, a.dim()).
Tensor nonzero(const Tensor& a);
/// The elements of a where mask (bool, or float != 0) is true, a and mask broadcast together:
/// 1-D, row-major. Differentiable in a (the gradient goes back to the selected places).
Tensor masked_select(const Tensor& a, const Tensor& mask);
/// int64 class ids (S...) -> int64 (S..., K), K = num_classes, or max id + 1 when -1.
Tensor one_hot(const Tensor& ids, int64_t num_classes = -1);
/// Uniform integers in [low, high) (int64), from the global generator (tapegrad's stream, not
/// PyTorch's).
Tensor randint(int64_t low, int64_t high, const Shape& shape);
Tensor randint(int64_t high, const Shape& shape);

// ---- the index ops with int64 tensors (ops.h has the Indices forms) ----------------------------
/// Rows of `a` along `axis` picked by a 1-D int64 tensor.
Tensor index_select(const Tensor& a, int64_t axis, const Tensor& index);
/// weight (V, C), int64 ids (S...) -> (S..., C).
Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx = -1);
/// logits (N, K) or (N, K, d...) with int64 class targets (N) or (N, d...).
/// The target's dtype decides: int64 holds class indices; float32 targets are probabilities.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets,
                     const CrossEntropyOptions& options = CrossEntropyOptions());
/// log-probabilities (N, K) or (N, K, d...) with int64 class targets.
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets,
                const CrossEntropyOptions& options = CrossEntropyOptions());

}  // namespace tg
