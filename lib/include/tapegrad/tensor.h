#pragma once
// tg::Tensor: a cheap shared handle over float32, int64 or bool data: a storage seen row-major,
// or through the strides of a view (reshape, narrow, transpose, ...; see "views" below).
//
// Dtypes (as LibTorch's): float32 is what every op computes on; int64 holds indices (class
// targets, token ids, argmax) and bool holds masks (what comparisons give). Views, clone,
// detach, cat and printing work on every dtype; an op that computes on values throws
// tg::TypeError for an int64 or bool input (convert with x.to(tg::kFloat32)).
//
// The values live in a buffer inside the library; this header does not include xtensor, so
// code that only uses tensors compiles fast. Include <tapegrad/xtensor.h> to reach them as
// an xtensor expression.
//
// A tensor that requires a gradient records every op applied to it on the tape; calling
// backward() on a scalar result replays the tape in reverse and fills .grad() of the leaves.
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tapegrad/error.h"

namespace tg {

using Shape = std::vector<int64_t>;

/// The element type of a tensor.
enum class Dtype : uint8_t { Float32, Int64, Bool };
constexpr Dtype kFloat32 = Dtype::Float32;
constexpr Dtype kFloat = Dtype::Float32;
constexpr Dtype kInt64 = Dtype::Int64;
constexpr Dtype kLong = Dtype::Int64;
constexpr Dtype kBool = Dtype::Bool;
/// "float32", "int64", "bool".
const char* to_string(Dtype dtype);

/// "[2, 3]": how shapes appear in every error message.
std::string to_string(const Shape& shape);

namespace detail {
struct TensorImpl;
}
namespace indexing {
class TensorIndex;  // tapegrad/ops/index.h
}

/// A mutable window on a tensor's values, for reading and setting them without xtensor.
class DataView {
 public:
  DataView(float* ptr, Shape shape);
  float* data() const { return ptr_; }
  int64_t size() const;
  const Shape& shape() const { return shape_; }
  float* begin() const { return ptr_; }
  float* end() const { return ptr_ + size(); }
  /// Flat, row-major element access, bounds-checked.
  float& operator[](int64_t i) const;
  /// Multi-index access, bounds-checked: view(1, 2) on a 2-D tensor.
  template <class... I>
  float& operator()(I... idx) const {
    const int64_t index[] = {static_cast<int64_t>(idx)...};
    return at(index, sizeof...(I));
  }
  void fill(float value) const;
  /// Copies values in row-major order; the count must equal size().
  void assign(const std::vector<float>& values) const;

 private:
  float& at(const int64_t* index, size_t rank) const;
  float* ptr_;
  Shape shape_;
};

class Tensor {
 public:
  /// An undefined tensor (like a default-constructed torch::Tensor): defined() is false.
  Tensor() = default;
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  Shape shape() const;
  int64_t dim() const;
  /// Size of one dimension; negative d counts from the end.
  int64_t size(int64_t d) const;
  int64_t numel() const;
  /// LibTorch's names: sizes() is shape(), ndimension() is dim().
  Shape sizes() const { return shape(); }

  // ---- dtype ------------------------------------------------------------------------------
  Dtype dtype() const;
  bool is_floating_point() const { return dtype() == Dtype::Float32; }
  /// This tensor if it has `dtype` already, else a converted copy (not recorded: no gradient
  /// flows through a conversion). float -> int64 truncates toward zero, anything -> bool is
  /// `!= 0`, bool -> number gives 0 or 1.
  Tensor to(Dtype dtype) const;

  // ---- views ------------------------------------------------------------------------------
  // A view (reshape, view, flatten, squeeze, unsqueeze, narrow, slice, select, transpose,
  // permute, t, expand) shares its base's storage: a write through either is seen by the
  // other, and they share one version counter. A tensor sees its storage through strides
  // and an offset, in elements, as in PyTorch.

  /// The step, in elements, between neighbours along each dim.
  Shape strides() const;
  /// Where element 0 sits in the storage, in elements.
  int64_t storage_offset() const;
  /// Whether the elements are one dense row-major block (what data() requires).
  bool is_contiguous() const;
  /// This tensor if it is contiguous, else a contiguous copy (recorded, so gradients flow).
  Tensor contiguous() const;

  /// The values, mutable: w.data()(0, 1) = 0.5f sets one weight. Writes through these are
  /// raw: not recorded and not counted in version() (as PyTorch's .data); use the in-place
  /// ops below, or NoGradGuard + copy_, when a backward may still read the old values.
  /// Both are a flat row-major window on the tensor's own elements (a contiguous view's
  /// included), so a tensor that is not contiguous throws tg::ValueError naming
  /// contiguous(). (PyTorch's data_ptr() would give the strided pointer; here a raw loop over
  /// a transposed view cannot go silently wrong.) to_vector() reads any tensor.
  /// These four read float32 tensors; an int64 or bool one throws tg::TypeError (read it
  /// with to_vector<int64_t>() or item<int64_t>()).
  DataView data() const;
  float* data_ptr() const;
  std::vector<float> to_vector() const;
  /// The single value of a one-element tensor.
  float item() const;
  /// Every element (row-major) of a tensor of any dtype, converted to T (float, int64_t,
  /// bool), as LibTorch's item<T>().
  template <class T>
  std::vector<T> to_vector() const;
  template <class T>
  T item() const;

  /// The accumulated gradient; undefined until a backward pass reaches this tensor.
  Tensor grad() const;
  /// Replaces the gradient (used by optimizers and checkpoints); undefined clears it.
  void set_grad(const Tensor& g) const;
  /// Zeroes the gradient in place (keeping its buffer), if there is one.
  void zero_grad() const;

  bool requires_grad() const;
  /// Only leaves can change this: marks the tensor as a parameter to differentiate. Only
  /// float32 tensors can require a gradient (tg::TypeError otherwise, as in PyTorch).
  const Tensor& requires_grad_(bool on = true) const;
  /// A leaf was created by the user; a non-leaf came out of a recorded op.
  bool is_leaf() const;
  /// Keep the gradient of a non-leaf tensor after backward (leaves always keep theirs).
  void retain_grad() const;
  /// The name of the op that produced this tensor ("matmul"), or "" for a leaf.
  std::string op_name() const;

  /// Backpropagates from this tensor. A non-scalar needs an explicit upstream gradient.
  /// Saved values are freed afterwards unless retain_graph is true.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  /// The same, accumulating only into the .grad() of `inputs` (leaves, or non-leaves, whose
  /// .grad() then fills as for retain_grad): the other leaves keep theirs, and only the ops on
  /// a path to an input run. PyTorch's backward(gradient, retain_graph, inputs=...).
  void backward(const Tensor& grad, bool retain_graph, const std::vector<Tensor>& inputs) const;

  /// A new leaf sharing this tensor's values, geometry and version counter, cut from the tape.
  Tensor detach() const;
  /// A new leaf with a copy of the values (contiguous, whatever this tensor's strides).
  Tensor clone() const;

  // ---- in-place ops (ops/inplace.cpp) ---------------------------------------------------------
  // Each writes this tensor's values and bumps its version, so a backward that saved the old
  // values refuses to run (tg::AutogradError) instead of computing with the new ones. On a
  // tensor that has a history (or an operand that requires grad) the write is recorded, and
  // the tensor's history continues from it, as in PyTorch. On a leaf that requires grad it is
  // an error unless grad mode is off (tg::NoGradGuard): that is how parameters are changed.
  // `other` broadcasts to this tensor's shape, which never changes.

  /// this ← src (broadcast), recorded: the gradient flows to src, none to the old values.
  const Tensor& copy_(const Tensor& src) const;
  const Tensor& add_(const Tensor& other) const;
  const Tensor& add_(float s) const;
  const Tensor& sub_(const Tensor& other) const;
  const Tensor& sub_(float s) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& mul_(float s) const;
  const Tensor& div_(const Tensor& other) const;
  const Tensor& div_(float s) const;
  /// Every element ← value (the old values get no gradient).
  const Tensor& fill_(float value) const;
  const Tensor& zero_() const;
  /// Clamps to [min, max] (NaN stays NaN); the gradient passes where min <= x <= max.
  const Tensor& clamp_(float min, float max) const;
  /// Where mask (0/1, broadcast) is nonzero, the element ← value.
  const Tensor& masked_fill_(const Tensor& mask, float value) const;

  // ---- methods mirroring LibTorch (ops/tensor_methods.cpp): x.f(args) is tg::f(x, args) ----
  Tensor sum() const;
  Tensor sum(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<int64_t>& dims, bool keepdim = false) const;
  /// (values, int64 indices) along dim.
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmin() const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  Tensor reshape(const Shape& shape) const;
  Tensor view(const Shape& shape) const;
  Tensor t() const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end) const;
  Tensor select(int64_t dim, int64_t index) const;
  /// select(0, index), as LibTorch's x[i].
  Tensor operator[](int64_t index) const;
  Tensor expand(const Shape& sizes) const;
  Tensor add(const Tensor& other) const;
  Tensor sub(const Tensor& other) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  Tensor neg() const;
  Tensor pow(float exponent) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor matmul(const Tensor& other) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor masked_fill(const Tensor& mask, float value) const;
  Tensor gt(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor gt(double s) const;
  Tensor lt(double s) const;
  Tensor ge(double s) const;
  Tensor le(double s) const;
  Tensor eq(double s) const;
  Tensor ne(double s) const;
  Tensor logical_not() const;
  /// The whole tensor's max / min (0-d; ties share the gradient), as LibTorch's x.max().
  Tensor max() const;
  Tensor min() const;
  Tensor amax(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor amin(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor all() const;
  Tensor any() const;
  Tensor all(int64_t dim, bool keepdim = false) const;
  Tensor any(int64_t dim, bool keepdim = false) const;
  Tensor cumsum(int64_t dim) const;
  Tensor logsumexp(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor var(const std::vector<int64_t>& dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor std(const std::vector<int64_t>& dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor norm(double p = 2.0, const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor prod() const;
  Tensor prod(int64_t dim, bool keepdim = false) const;
  /// Either bound may be std::nullopt (tapegrad/ops/pointwise.h).
  Tensor clamp(std::optional<float> min, std::optional<float> max = std::nullopt) const;
  Tensor clamp_min(float min) const;
  Tensor clamp_max(float max) const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor reciprocal() const;
  Tensor rsqrt() const;
  Tensor sign() const;
  Tensor round() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor pow(const Tensor& exponent) const;
  Tensor repeat(const Shape& repeats) const;
  Tensor flip(const std::vector<int64_t>& dims) const;
  Tensor roll(const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims = {}) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;

  // ---- indexing and selection (ops/index.cpp; tapegrad/ops/index.h) --------------------------
  /// LibTorch's x.index({Slice(1, None, 2), -1, None, Ellipsis, mask}): integers and slices
  /// give a view, an int64 or bool tensor (advanced indexing) a copy.
  Tensor index(std::initializer_list<indexing::TensorIndex> indices) const;
  /// x[indices] ← value (broadcast), an in-place write: the gradient flows to value.
  const Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices,
                           const Tensor& value) const;
  const Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, float value) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t dim, const Tensor& index, float value) const;
  const Tensor& scatter_(int64_t dim, const Tensor& index, const Tensor& src) const;
  const Tensor& scatter_(int64_t dim, const Tensor& index, float value) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  const Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source, float alpha = 1.0f) const;
  const Tensor& index_add_(int64_t dim, const Tensor& index, const Tensor& source,
                           float alpha = 1.0f) const;
  /// (values, int64 indices).
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true,
                                  bool sorted = true) const;
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  Tensor argsort(int64_t dim = -1, bool descending = false) const;

  /// How many in-place writes the values have had (PyTorch's x._version). Raw writes through
  /// data() and data_ptr() are not counted.
  uint32_t version() const;

  std::string to_string() const;

  /// True if both handles point at the same tensor.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  const std::shared_ptr<detail::TensorImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<detail::TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// Integer indices as a plain struct: a convenience kept from before int64 tensors. It
/// converts implicitly to an int64 Tensor, and every op that takes indices takes either.
struct Indices {
  std::vector<int64_t> values;
  Shape shape;

  Indices() = default;
  Indices(std::vector<int64_t> v, Shape s);
  Indices(std::initializer_list<int64_t> v);  // 1-D
  /// The values of an int64 tensor (tg::TypeError for another dtype).
  explicit Indices(const Tensor& t);
  int64_t numel() const { return static_cast<int64_t>(values.size()); }
  /// An int64 tensor holding a copy of the values.
  operator Tensor() const;
};

// ---- factories ------------------------------------------------------------------------
Tensor tensor(const std::vector<float>& values, const Shape& shape, bool requires_grad = false);
Tensor tensor(std::initializer_list<float> values, bool requires_grad = false);  // 1-D
Tensor tensor(std::initializer_list<std::initializer_list<float>> rows,
              bool requires_grad = false);  // 2-D
/// Values of any dtype given as integers: tensor({1, 0, 1}, {3}, tg::kBool).
Tensor tensor(const std::vector<int64_t>& values, const Shape& shape, Dtype dtype);
/// Integer values as an int64 tensor: tensor(std::vector<int64_t>{2, 0, 1}, {3}).
template <class I, class = std::enable_if_t<std::is_integral<I>::value>>
Tensor tensor(const std::vector<I>& values, const Shape& shape) {
  return tensor(std::vector<int64_t>(values.begin(), values.end()), shape, Dtype::Int64);
}
/// 1-D, LibTorch's torch::tensor({1, 2, 3}, torch::kLong).
Tensor tensor(std::initializer_list<int64_t> values, Dtype dtype);
Tensor scalar(float value, bool requires_grad = false);
Tensor zeros(const Shape& shape, bool requires_grad = false);
Tensor ones(const Shape& shape, bool requires_grad = false);
Tensor full(const Shape& shape, float value, bool requires_grad = false);
/// The same with a dtype (requires_grad only for float32).
Tensor zeros(const Shape& shape, Dtype dtype, bool requires_grad = false);
Tensor ones(const Shape& shape, Dtype dtype, bool requires_grad = false);
Tensor full(const Shape& shape, float value, Dtype dtype, bool requires_grad = false);
/// The shape and dtype of t.
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
/// [start, end) in steps of `step`, as a 1-D tensor. As in PyTorch, integer bounds give an
/// int64 tensor (arange(5), arange(2, 10, 3)) and float bounds a float32 one.
Tensor arange(float start, float end, float step = 1.0f);
Tensor arange(double start, double end, double step = 1.0);
Tensor arange(int64_t start, int64_t end, int64_t step = 1);
Tensor arange(int start, int end, int step = 1);
Tensor arange(int64_t n);
Tensor arange(int n);
/// Any bounds with an explicit dtype: arange(0, 5, 1, tg::kFloat32).
Tensor arange(double start, double end, double step, Dtype dtype);
/// Uniform in [0, 1) and standard normal, from the global generator (see random.h).
Tensor rand(const Shape& shape, bool requires_grad = false);
Tensor randn(const Shape& shape, bool requires_grad = false);

}  // namespace tg
