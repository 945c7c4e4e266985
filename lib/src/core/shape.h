#pragma once
// Library-internal, the core layer: shapes as tapegrad and xtensor spell them, and the checks
// every layer above makes on them. Not installed.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tapegrad/tensor.h"
#include "tapegrad/xtensor.h"

namespace tg {
namespace detail {

/// The shape of an array or a view, in tapegrad's spelling.
template <class E>
Shape shape_of(const E& a) {
  return Shape(a.shape().begin(), a.shape().end());
}
std::vector<size_t> to_xshape(const Shape& s);
/// The product of the dims (the caller has checked the shape with check_shape).
int64_t numel_of(const Shape& s);
/// The most elements a shape may have: its float32 bytes fit in a ptrdiff_t.
constexpr uint64_t kMaxElements = uint64_t(1) << 60;
/// Whether the product of the shape's nonzero dims stays within kMaxElements. Past it, the
/// byte count would overflow, or the row-major strides even when another dim is 0.
bool within_max_elements(const Shape& shape);
/// Throws ShapeError naming `what` for a negative dim, or when the shape is not
/// within_max_elements.
void check_shape(const Shape& shape, const char* what);
/// Maps a possibly negative axis into [0, rank); throws IndexError naming the op.
size_t norm_axis(int64_t axis, size_t rank, const char* op);

}  // namespace detail
}  // namespace tg
