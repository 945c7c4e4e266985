#pragma once
// Library-internal, the core layer: what a tensor handle points at. Not installed.
//
// A TensorImpl points at a Storage: the values (an xtensor array) and their version counter,
// shared by every handle that aliases them (detach()) and kept alive by the backward closures
// that saved them. Every write through the API (in-place ops, copy_, optimizer steps,
// initializers, loading) bumps the version, so a backward can tell that a value it saved has
// changed. Once a backward pass reached it, a tensor also has a gradient (a Storage of its
// own). The autograd layer adds the op that produced it (grad_fn); the core only carries that
// pointer.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "tapegrad/error.h"
#include "tapegrad/tensor.h"
#include "tapegrad/xtensor.h"

namespace tg {
namespace detail {

struct Node;  // autograd/node.h

/// Values and their version: what aliases share.
struct Storage {
  explicit Storage(Array a) : data(std::move(a)) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  Array data;
  std::atomic<uint32_t> version{0};  // in-place writes so far
};

inline std::shared_ptr<Storage> make_storage(Array a) {
  return std::make_shared<Storage>(std::move(a));
}
inline uint32_t version_of(const Storage& s) { return s.version.load(std::memory_order_relaxed); }
/// Records an in-place write (every write through the API calls this).
inline void bump_version(Storage& s) { s.version.fetch_add(1, std::memory_order_relaxed); }

struct TensorImpl {
  std::shared_ptr<Storage> storage;  // shared with aliases, and with closures that saved it
  std::shared_ptr<Storage> grad;     // leaves (and retain_grad non-leaves) after backward
  std::shared_ptr<Node> grad_fn;     // the op that produced this tensor; null for a leaf
  bool requires_grad = false;
  bool retains_grad = false;
};

/// The impl behind a handle; throws ValueError("<what>: the tensor is undefined") if none.
inline TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl, const char* what) {
  if (!impl) throw ValueError(std::string(what) + ": the tensor is undefined");
  return *impl;
}

inline std::shared_ptr<TensorImpl> new_impl() { return std::make_shared<TensorImpl>(); }

inline const Array& val(const Tensor& t) { return t.impl()->storage->data; }
/// The values, for an in-place write: the caller bumps the version (bump_version(t)).
inline Array& mutable_val(const Tensor& t) { return t.impl()->storage->data; }
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
