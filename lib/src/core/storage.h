#pragma once
// Library-internal, the core layer: what a tensor handle points at. Not installed.
//
// A TensorImpl owns its values (an xtensor array, shared so that backward closures can keep
// it alive) and, once a backward pass reached it, its gradient. The autograd layer adds the
// op that produced it (grad_fn); the core only carries that pointer.
#include <memory>
#include <string>

#include "tapegrad/error.h"
#include "tapegrad/tensor.h"
#include "tapegrad/xtensor.h"

namespace tg {
namespace detail {

struct Node;  // autograd/node.h

struct TensorImpl {
  std::shared_ptr<Array> value;  // shared so that backward closures can keep it alive
  std::shared_ptr<Array> grad;   // leaves (and retain_grad non-leaves) after backward
  std::shared_ptr<Node> grad_fn; // the op that produced this tensor; null for a leaf
  bool requires_grad = false;
  bool retains_grad = false;
};

/// The impl behind a handle; throws ValueError("<what>: the tensor is undefined") if none.
inline TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl, const char* what) {
  if (!impl) throw ValueError(std::string(what) + ": the tensor is undefined");
  return *impl;
}

/// Sets glibc's malloc thresholds (memory.cpp) once, on the first call.
bool tune_malloc();
inline void ensure_malloc_tuned() {
  static const bool tuned = tune_malloc();
  (void)tuned;
}

/// Every TensorImpl comes from here, so that malloc is tuned before the first tensor's
/// buffers are reused (and not at load time, in programs that never make one).
inline std::shared_ptr<TensorImpl> new_impl() {
  ensure_malloc_tuned();
  return std::make_shared<TensorImpl>();
}

inline const Array& val(const Tensor& t) { return *t.impl()->value; }
inline const std::shared_ptr<Array>& saved(const Tensor& t) { return t.impl()->value; }

/// A new leaf holding `value` (no tape involved).
Tensor make_leaf(Array value, bool requires_grad = false);

/// Throws ValueError("<op>: <what> is undefined") for an undefined tensor (a default-built
/// tg::Tensor), which would otherwise be dereferenced.
inline void require_defined(const Tensor& t, const char* op, const char* what = "the input") {
  if (!t.defined()) throw ValueError(std::string(op) + ": " + what + " is undefined");
}

}  // namespace detail
}  // namespace tg
