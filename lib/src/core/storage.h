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
// A tensor whose geometry is row-major and dense (contiguous) also carries `view`, an
// xtensor adaptor over its elements, which kernels read through val(). A strided view (a
// transpose, a narrow along an inner dim, an expand) has none: a kernel that cannot walk
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

/// The element type of a storage. float32 is the only one today; integer and boolean tensors
/// (the API issue) add theirs here, each with an owning array of its own in Storage.
enum class DType : uint8_t { Float32 };
inline const char* dtype_name(DType) { return "float32"; }

/// Values and their version: what aliases and views share.
struct Storage {
  explicit Storage(Array a) : data(std::move(a)) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  Array data;  // owns the elements; its shape is that of the tensor that made it
  DType dtype = DType::Float32;
  std::atomic<uint32_t> version{0};  // in-place writes so far
};

inline std::shared_ptr<Storage> make_storage(Array a) {
  return std::make_shared<Storage>(std::move(a));
}
inline uint32_t version_of(const Storage& s) { return s.version.load(std::memory_order_relaxed); }
/// Records an in-place write (every write through the API calls this).
inline void bump_version(Storage& s) { s.version.fetch_add(1, std::memory_order_relaxed); }

/// A dense, row-major window on float elements that belong to a Storage (no ownership).
using View = xt::xarray_adaptor<xt::xbuffer_adaptor<float*, xt::no_ownership>,
                                xt::layout_type::row_major, Array::shape_type>;
using Strides = xt::svector<int64_t, 4>;

/// An adaptor over `n` elements at `p` with `shape`.
inline View view_over(float* p, const Array::shape_type& shape, size_t n) {
  return View(xt::xbuffer_adaptor<float*, xt::no_ownership>(p, n), shape);
}
/// An adaptor over an array's own elements (for helpers that take a View).
inline View view_of(Array& a) { return view_over(a.data(), a.shape(), a.size()); }

struct TensorImpl {
  std::shared_ptr<Storage> storage;  // shared with aliases, views, and closures that saved it
  // The geometry, in elements. Strides follow PyTorch: a dim of size 1 may have any stride,
  // a dim that expand() repeats has stride 0.
  Array::shape_type shape;
  Strides strides;
  int64_t offset = 0;
  std::optional<View> view;  // exactly when the geometry is contiguous
  // A view's base: the tensor (not itself a view) whose storage it shares, for the autograd
  // of in-place writes through views (autograd/views.cpp). Null for anything else.
  std::shared_ptr<TensorImpl> base;
  uint32_t history = 0;       // how many times an in-place op gave this tensor a new grad_fn
  uint32_t base_history = 0;  // a view's: base's `history` when its grad_fn was derived
  bool tracks_base = false;   // a view made with grad mode on: its history follows base's

  std::shared_ptr<Storage> grad;     // leaves (and retain_grad non-leaves) after backward
  std::shared_ptr<Node> grad_fn;     // the op that produced this tensor; null for a leaf
  bool requires_grad = false;
  bool retains_grad = false;

  bool contiguous() const { return view.has_value(); }
  size_t numel() const {
    size_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  /// The first element (for a strided view: the element at index 0).
  float* ptr() const { return storage->data.data() + offset; }
};

/// The row-major strides of `shape`.
Strides contiguous_strides(const Array::shape_type& shape);
/// Sets the geometry, and `view` when it is contiguous. The caller has checked that every
/// element it reaches lies within the storage.
void set_geometry(TensorImpl& impl, Array::shape_type shape, Strides strides, int64_t offset);
/// The whole storage, row-major, in its array's shape: what a fresh value gets.
inline void set_whole(TensorImpl& impl) {
  Array& a = impl.storage->data;
  impl.shape = a.shape();
  impl.strides = contiguous_strides(impl.shape);
  impl.offset = 0;
  impl.view.emplace(view_of(a));
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

/// Throws tg::Error: a kernel that needs a contiguous input got a strided view (an op that
/// forgot dense(); never the user's fault).
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
/// The tensor's elements in row-major order, copied out of any geometry.
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

/// Throws ValueError("<op>: <what> is undefined") for an undefined tensor (a default-built
/// tg::Tensor), which would otherwise be dereferenced.
inline void require_defined(const Tensor& t, const char* op, const char* what = "the input") {
  if (!t.defined()) throw ValueError(std::string(op) + ": " + what + " is undefined");
}

}  // namespace detail
}  // namespace tg
