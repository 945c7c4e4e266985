#pragma once
// tg::Tensor: a cheap shared handle over float32 data: a storage seen row-major, or through
// the strides of a view (reshape, narrow, transpose, ...; see "views" below).
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
#include <string>
#include <vector>

#include "tapegrad/error.h"

namespace tg {

using Shape = std::vector<int64_t>;

/// "[2, 3]": how shapes appear in every error message.
std::string to_string(const Shape& shape);

namespace detail {
struct TensorImpl;
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
  DataView data() const;
  float* data_ptr() const;
  std::vector<float> to_vector() const;
  /// The single value of a one-element tensor.
  float item() const;

  /// The accumulated gradient; undefined until a backward pass reaches this tensor.
  Tensor grad() const;
  /// Replaces the gradient (used by optimizers and checkpoints); undefined clears it.
  void set_grad(const Tensor& g) const;
  /// Zeroes the gradient in place (keeping its buffer), if there is one.
  void zero_grad() const;

  bool requires_grad() const;
  /// Only leaves can change this: marks the tensor as a parameter to differentiate.
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

/// Integer indices (class targets, token ids, gather indices): a type of their own, so a
/// float tensor can never be mistaken for indices. No gradient flows through them.
struct Indices {
  std::vector<int64_t> values;
  Shape shape;

  Indices() = default;
  Indices(std::vector<int64_t> v, Shape s);
  Indices(std::initializer_list<int64_t> v);  // 1-D
  int64_t numel() const { return static_cast<int64_t>(values.size()); }
};

// ---- factories ------------------------------------------------------------------------
Tensor tensor(const std::vector<float>& values, const Shape& shape, bool requires_grad = false);
Tensor tensor(std::initializer_list<float> values, bool requires_grad = false);  // 1-D
Tensor tensor(std::initializer_list<std::initializer_list<float>> rows,
              bool requires_grad = false);  // 2-D
Tensor scalar(float value, bool requires_grad = false);
Tensor zeros(const Shape& shape, bool requires_grad = false);
Tensor ones(const Shape& shape, bool requires_grad = false);
Tensor full(const Shape& shape, float value, bool requires_grad = false);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
/// [start, end) in steps of `step`, as a 1-D tensor.
Tensor arange(float start, float end, float step = 1.0f);
Tensor arange(int64_t n);
/// Uniform in [0, 1) and standard normal, from the global generator (see random.h).
Tensor rand(const Shape& shape, bool requires_grad = false);
Tensor randn(const Shape& shape, bool requires_grad = false);

}  // namespace tg
