#pragma once
// Library-internal, the ops layer: what every op's source includes. The layers below (the
// storage, the shape checks, the tape's record()) and the helpers ops share: broadcasting,
// axis splits and shape errors. Not installed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "autograd/node.h"
#include "core/shape.h"
#include "core/storage.h"
#include "tapegrad/ops.h"

namespace tg {
namespace detail {

/// numpy broadcasting of two shapes; throws ShapeError naming the op.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// A row-major shape seen as (outer, n, inner) around one axis: element (o, i, j) sits at
/// (o * n + i) * inner + j. Most axis-wise kernels loop over this.
struct AxisSplit {
  size_t outer = 1, n = 1, inner = 1;
};
AxisSplit split_at(const Shape& shape, size_t axis);
[[noreturn]] void shape_error(const char* op, const std::string& what);

}  // namespace detail
}  // namespace tg
