#pragma once
// Library-internal: the ops' door to the vector kernels (backend/vec.h), on arrays. Binary ops
// broadcast as numpy; the kernels take the common cases (both operands of the output's shape,
// or one repeating whole inside it: a bias row, a scalar) and xtensor the rest.
#include "backend/vec.h"
#include "core/storage.h"

namespace tg {
namespace detail {

using XShape = Array::shape_type;

/// y = a op b, broadcast (the caller has checked that the shapes broadcast).
Array binary(vec::Binary op, const float* a, const XShape& sa, const float* b, const XShape& sb);
template <class A, class B>
Array binary(vec::Binary op, const A& a, const B& b) {
  return binary(op, a.data(), a.shape(), b.data(), b.shape());
}
/// y = a op s
Array binary(vec::Binary op, const View& a, float s);

/// g ← g op d, where d broadcasts to g's shape.
void binary_(vec::Binary op, Array& g, const float* d, const XShape& sd);
template <class D>
void binary_(vec::Binary op, Array& g, const D& d) {
  binary_(op, g, d.data(), d.shape());
}

/// y = f(x) for a kernel f of vec::Kernels (exp, tanh, sigmoid), in x's shape.
Array unary(void (*f)(const float*, float*, size_t), const View& x);

/// A copy of a, split across tapegrad's threads when large (a gradient given to two inputs).
Array copy_of(const Array& a);

}  // namespace detail
}  // namespace tg
