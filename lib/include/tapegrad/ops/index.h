#pragma once
// Indexing and selection: gather/scatter along a dim, index_add, sort/topk, multinomial, and
// LibTorch's tensor indexing API (namespace tg::indexing, Tensor::index and index_put_).
//
// Index tensors are int64 (an Indices converts to one); an index out of range throws
// tg::IndexError naming the op, the dim, the index and the size. Negative indices are refused
// by gather/scatter/index_add (as PyTorch's CPU kernels) but count from the end in
// Tensor::index, as in Python.
//
// Legend: S = any shape, d = the dim an op works along, n = x.size(d), k = picked entries.
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>

#include "tapegrad/ops.h"
#include "tapegrad/tensor.h"

namespace tg {

// ---- gather / scatter -----------------------------------------------------------------------
/// out[i][j][k] = x[i][index[i][j][k]][k] (dim = 1): index has x's rank and no dim larger than
/// x's except along `dim`; out has index's shape.      dx = scatter_add(0, dim, index, g)
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// A copy of x with x[i][index[i][j][k]][k] ← src[i][j][k] (dim = 1); index no larger than src
/// along every dim, nor than x except along dim. If two entries of index hit one place, one of
/// them wins (which one is unspecified, as in PyTorch).
/// dx = g with zeros at the written places, dsrc = gather(g, dim, index) (zeros elsewhere).
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// The same with every written place ← value.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, float value);
/// A copy of x with x[i][index[i][j][k]][k] += src[i][j][k]: repeats add up.
/// dx = g, dsrc = gather(g, dim, index).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// x (S) with x.select(dim, index[i]) += alpha * source.select(dim, i): index 1-D (k), source
/// x's shape with k along dim.      dx = g, dsource = alpha * index_select(g, dim, index)
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 float alpha = 1.0f);

// ---- sorting ----------------------------------------------------------------------------------
/// (values, int64 indices) sorted along dim; ties keep their order (a stable sort), NaN counts
/// as the largest. Differentiable in values: the gradient goes back to where each came from.
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);
/// The indices of sort (int64).
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
/// The k largest (smallest) entries along dim: (values, int64 indices), dim of size k. Sorted
/// (best first) when `sorted`, else in the order they sit in x. Ties: the earlier one first.
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);

// ---- sampling ---------------------------------------------------------------------------------
/// probs (K) or (N, K), non-negative weights (need not sum to 1) -> int64 (num_samples) or
/// (N, num_samples): category draws from the global generator (tapegrad's stream, so not
/// PyTorch's numbers). Without replacement every row's draws are distinct.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);

// ---- the tensor indexing API ------------------------------------------------------------------
namespace indexing {

struct NoneType {};
struct EllipsisType {};
/// A new dim of size 1 (Python's None / numpy.newaxis).
constexpr NoneType None{};
/// As many full slices as the other indices leave dims (Python's ...).
constexpr EllipsisType Ellipsis{};

/// Python's start:stop:step; each part may be omitted (None). step must be > 0 (as PyTorch);
/// start and stop may be negative (from the end) and are clamped to the dim.
class Slice {
 public:
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : start_(start), stop_(stop), step_(step) {}
  Slice(NoneType, std::optional<int64_t> stop = std::nullopt, std::optional<int64_t> step = std::nullopt)
      : Slice(std::nullopt, stop, step) {}
  Slice(std::optional<int64_t> start, NoneType, std::optional<int64_t> step = std::nullopt)
      : Slice(start, std::nullopt, step) {}
  Slice(NoneType, NoneType, std::optional<int64_t> step = std::nullopt)
      : Slice(std::nullopt, std::nullopt, step) {}
  const std::optional<int64_t>& start() const { return start_; }
  const std::optional<int64_t>& stop() const { return stop_; }
  const std::optional<int64_t>& step() const { return step_; }

 private:
  std::optional<int64_t> start_, stop_, step_;
};

/// One entry of x.index({...}): an integer (that dim is removed), a Slice, None, Ellipsis
/// (also "..."), true/false (a new dim of size 1/0), or an int64/bool tensor.
class TensorIndex {
 public:
  enum class Kind { Integer, Slice, None, Ellipsis, Boolean, Tensor };
  template <class I, class = std::enable_if_t<std::is_integral<I>::value && !std::is_same<I, bool>::value>>
  TensorIndex(I i) : kind_(Kind::Integer), integer_(static_cast<int64_t>(i)) {}
  TensorIndex(bool b) : kind_(Kind::Boolean), integer_(b) {}
  TensorIndex(Slice s) : kind_(Kind::Slice), slice_(s) {}
  TensorIndex(NoneType) : kind_(Kind::None) {}
  TensorIndex(EllipsisType) : kind_(Kind::Ellipsis) {}
  /// Only "..." (LibTorch's spelling of Ellipsis); anything else throws tg::ValueError.
  TensorIndex(const char* s);
  TensorIndex(Tensor t) : kind_(Kind::Tensor), tensor_(std::move(t)) {}

  Kind kind() const { return kind_; }
  int64_t integer() const { return integer_; }
  bool boolean() const { return integer_ != 0; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t integer_ = 0;
  Slice slice_;
  Tensor tensor_;
};

}  // namespace indexing

/// Basic slicing with a step: elements start, start+step, ... before end of one dim (Python's
/// start:end:step, clamped to the dim). A view; step must be > 0.
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step);

}  // namespace tg
