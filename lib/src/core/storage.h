#pragma once
// Library-internal, the core layer: what a tensor handle points at. Not installed.
//
// A tensor is a Storage (the values, their element type and their version counter) seen
// through a geometry: a shape, strides and an offset, all in elements. Every handle that
// aliases the values shares the Storage: a detach(), a view (reshape, narrow, transpose...)
// and the backward closures that saved it. Every write through the API (in-place ops,
// copy_, optimizer steps, initializers, loading) bumps the version, so a backward can tell
// that a value it saved has changed, through whichever view it was written.
//
// Most tensors see their whole storage, row-major: they carry nothing but the storage, and
// kernels read the storage's own adaptor (Storage::whole) through val(). A view carries its
// geometry in a ViewInfo, and a contiguous one an adaptor of its own; a strided view (a
// transpose, a narrow along an inner dim, an expand) has none, and a kernel that cannot walk
// strides asks for a contiguous input first (dense() in ops/common.h).
//
// Once a backward pass reached it, a tensor also has a gradient (a Storage of its own). The
// autograd layer adds the op that produced it (grad_fn); the core only carries that pointer.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <xtensor/xadapt.hpp>

#include "tapegrad/error.h"
#include "tapegrad/tensor.h"
#include "tapegrad/xtensor.h"

namespace tg {
namespace detail {

struct Node;  // autograd/node.h
struct TensorImpl;

/// The element type of a storage (tg::Dtype; the core's older name).
using DType = Dtype;
inline const char* dtype_name(DType d) { return to_string(d); }

/// A dense, row-major window on float elements that belong to a Storage (no ownership).
using View = ArrayView;
using Strides = xt::svector<int64_t, 4>;

/// An adaptor over `n` elements at `p` with `shape`.
inline View view_over(float* p, const Array::shape_type& shape, size_t n) {
  return View(xt::xbuffer_adaptor<float*, xt::no_ownership>(p, n), shape);
}
/// An adaptor over an array's own elements (for helpers that take a View).
inline View view_of(Array& a) { return view_over(a.data(), a.shape(), a.size()); }

/// A fresh storage id (1, 2, ...; 0 means none).
uint64_t next_storage_id();
/// Drops every device copy of storage `id` (backend/device.cpp; a no-op without a device).
void forget_device_copies(uint64_t id);

/// Values and their version: what aliases and views share.
///
/// A float32 storage owns `elements`, and `data` sees them all. An int64 or bool storage owns
/// `ints` or `bools` instead; its `data` is empty, and every tensor over it carries its
/// geometry in a ViewInfo and has no dense float window (view is null), so a float kernel's
/// val() or ptr() refuses it (tg::TypeError) rather than read floats that are not there.
struct Storage {
  /// Takes over a's elements (no copy).
  explicit Storage(Array a)
      : elements(std::move(a.storage())), data(view_over(elements.data(), a.shape(), elements.size())) {}
  explicit Storage(std::vector<int64_t> v)
      : data(view_over(nullptr, {0}, 0)), dtype(DType::Int64), ints(std::move(v)) {}
  explicit Storage(std::vector<uint8_t> v)
      : data(view_over(nullptr, {0}, 0)), dtype(DType::Bool), bools(std::move(v)) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  ~Storage() {
    if (on_device.load(std::memory_order_relaxed)) forget_device_copies(id);
  }

  Array::storage_type elements;  // owns them (float32)
  View data;  // all of them, in the shape of the tensor that made them: what most tensors see
  DType dtype = DType::Float32;
  std::atomic<uint32_t> version{0};  // in-place writes so far
  std::vector<int64_t> ints;         // an int64 storage's values
  std::vector<uint8_t> bools;        // a bool storage's values, 0 or 1
  // What a device cache of these values keys on (backend/device.cpp): an id that is never
  // reused, and how often a raw pointer was handed out (data(), data_ptr(), tg::array()):
  // raw writes are not versioned, so each hand-out makes a device copy stale.
  const uint64_t id = next_storage_id();
  std::atomic<uint32_t> raw_access{0};
  std::atomic<bool> on_device{false};  // a device cache may hold a copy: forget it on death
};

inline std::shared_ptr<Storage> make_storage(Array a) {
  return std::make_shared<Storage>(std::move(a));
}
inline uint32_t version_of(const Storage& s) { return s.version.load(std::memory_order_relaxed); }
/// Records an in-place write (every write through the API calls this).
inline void bump_version(Storage& s) { s.version.fetch_add(1, std::memory_order_relaxed); }

/// The row-major strides of `shape` (a dim of size 0 steps as if it had size 1, as PyTorch).
Strides contiguous_strides(const Array::shape_type& shape);

/// What a view knows beyond its storage: its geometry, in elements, and its base. Most
/// tensors are no view (an op's fresh output): they have none, and see the whole storage.
struct ViewInfo {
  // Strides follow PyTorch: a dim of size 1 may have any stride, a dim that expand()
  // repeats has stride 0.
  Array::shape_type shape;
  Strides strides;
  int64_t offset = 0;
  std::unique_ptr<View> window;  // when contiguous but not the whole storage
  // The tensor (not itself a view) whose storage it shares, for the autograd of in-place
  // writes through views (autograd/views.cpp). Null for a detach() of a whole tensor.
  std::shared_ptr<TensorImpl> base;
  uint32_t base_history = 0;  // base's `history` when this view's grad_fn was derived
  bool tracks_base = false;   // made with grad mode on: its history follows base's
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;  // shared with aliases, views, and closures that saved it
  View* view = nullptr;              // the dense window kernels read; null for a strided view
  std::unique_ptr<ViewInfo> vi;      // null: the whole storage, row-major

  std::shared_ptr<Storage> grad;     // leaves (and retain_grad non-leaves) after backward
  std::shared_ptr<Node> grad_fn;     // the op that produced this tensor; null for a leaf
  uint32_t history = 0;              // how many times an in-place op gave it a new grad_fn
  bool requires_grad = false;
  bool retains_grad = false;

  const Array::shape_type& shape() const { return vi ? vi->shape : storage->data.shape(); }
  Strides strides() const { return vi ? vi->strides : contiguous_strides(shape()); }
  int64_t offset() const { return vi ? vi->offset : 0; }
  /// The tensor this one is a view of, if any.
  const std::shared_ptr<TensorImpl>* base() const { return vi && vi->base ? &vi->base : nullptr; }
  bool contiguous() const { return view != nullptr; }
  size_t numel() const {
    size_t n = 1;
    for (auto d : shape()) n *= d;
    return n;
  }
  DType dtype() const { return storage->dtype; }
  /// The first element (for a strided view: the element at index 0). float32 only.
  float* ptr() const;
};

/// Throws tg::TypeError: an op that computes on floats got an int64 or bool tensor.
[[noreturn]] void not_float(const TensorImpl& impl);
inline float* TensorImpl::ptr() const {
  if (storage->dtype != DType::Float32) not_float(*this);
  return storage->data.data() + offset();
}

/// Sets a view's geometry, and `view` when it is contiguous. The caller has checked that
/// every element it reaches lies within the storage.
void set_geometry(TensorImpl& impl, Array::shape_type shape, Strides strides, int64_t offset);
/// The whole storage, row-major, in its array's shape: what a fresh value gets.
inline void set_whole(TensorImpl& impl) {
  impl.vi.reset();
  impl.view = &impl.storage->data;
}

/// The impl behind a handle; throws ValueError("<what>: the tensor is undefined") if none.
inline TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl, const char* what) {
  if (!impl) throw ValueError(std::string(what) + ": the tensor is undefined");
  return *impl;
}

inline std::shared_ptr<TensorImpl> new_impl() { return std::make_shared<TensorImpl>(); }
/// A new impl holding the whole of `storage`.
inline std::shared_ptr<TensorImpl> impl_over(std::shared_ptr<Storage> storage) {
  auto impl = new_impl();
  impl->storage = std::move(storage);
  set_whole(*impl);
  return impl;
}

/// Throws tg::TypeError for an int64 or bool tensor (see Storage), else tg::Error: a kernel
/// that needs a contiguous input got a strided view (an op that forgot dense(); never the
/// user's fault).
[[noreturn]] void strided_input(const TensorImpl& impl);

/// Copies the elements a geometry reaches in `src` to `out`, in row-major order.
void gather(const float* src, const Array::shape_type& shape, const Strides& strides,
            int64_t offset, float* out);
/// Writes `values` (row-major) to the elements a geometry reaches in `dst`.
void scatter(float* dst, const Array::shape_type& shape, const Strides& strides, int64_t offset,
             const float* values);
/// Adds `values` (row-major) to the elements a geometry reaches in `dst` (an element that the
/// geometry reaches twice, through a stride of 0, gets both).
void scatter_add(float* dst, const Array::shape_type& shape, const Strides& strides,
                 int64_t offset, const float* values);
/// Whether two elements of the geometry share a storage element (a stride of 0 over a dim
/// longer than 1, as expand() makes).
bool overlaps(const TensorImpl& impl);
/// The tensor's elements in row-major order, copied out of any geometry (float32 only).
Array dense_copy(const TensorImpl& impl);
/// Writes `values` (row-major, impl.numel() of them) to the elements the geometry reaches.
void write_dense(const TensorImpl& impl, const float* values);

/// The values, read-only, for kernels. A strided view has none (see dense()).
inline const View& val(const TensorImpl& impl) {
  if (!impl.view) strided_input(impl);
  return *impl.view;
}
inline const View& val(const Tensor& t) { return val(*t.impl()); }
/// The values, for an in-place write to a contiguous tensor: the caller bumps the version
/// (bump_version(t)).
inline View& mutable_val(const Tensor& t) {
  TensorImpl& impl = *t.impl();
  if (!impl.view) strided_input(impl);
  return *impl.view;
}
inline void bump_version(const Tensor& t) { bump_version(*t.impl()->storage); }

/// A new leaf holding `value` (no tape involved).
Tensor make_leaf(Array value, bool requires_grad = false);

// ---- int64 and bool tensors (core/dtype.cpp) ----------------------------------------------
/// A new int64 or bool tensor of `shape` over `storage` (row-major geometry, no float window).
Tensor make_typed_leaf(std::shared_ptr<Storage> storage, const Shape& shape);
Tensor make_int64(std::vector<int64_t> values, const Shape& shape);
Tensor make_bool(std::vector<uint8_t> values, const Shape& shape);
/// Every element of a tensor of any dtype, row-major, converted to T (float, int64_t,
/// uint8_t: bool as 0/1, a number as != 0).
template <class T>
std::vector<T> values_as(const TensorImpl& impl);
/// A copy of any tensor in row-major order, of the same dtype, as a new leaf (no history).
Tensor dense_clone(const TensorImpl& impl);
/// Whether the geometry is row-major (what is_contiguous() reports, for any dtype).
bool row_major(const TensorImpl& impl);

/// Throws ValueError("<op>: <what> is undefined") for an undefined tensor (a default-built
/// tg::Tensor), which would otherwise be dereferenced.
inline void require_defined(const Tensor& t, const char* op, const char* what = "the input") {
  if (!t.defined()) throw ValueError(std::string(op) + ": " + what + " is undefined");
}

}  // namespace detail
}  // namespace tg
