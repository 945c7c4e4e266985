// The helpers every op shares: broadcasting, axis splits, shape errors.
#include "ops/common.h"

#include <algorithm>

namespace tg {
namespace detail {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      shape_error(op, "shapes " + to_string(a) + " and " + to_string(b) +
                          " cannot be broadcast together (dim " + std::to_string(i) + ": " +
                          std::to_string(da) + " vs " + std::to_string(db) + ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

AxisSplit split_at(const Shape& shape, size_t axis) {
  AxisSplit s;
  for (size_t i = 0; i < shape.size(); ++i) {
    const auto d = static_cast<size_t>(shape[i]);
    if (i < axis) s.outer *= d;
    else if (i == axis) s.n = d;
    else s.inner *= d;
  }
  return s;
}

void shape_error(const char* op, const std::string& what) {
  throw ShapeError(std::string(op) + ": " + what);
}

}  // namespace detail
}  // namespace tg
