// Shapes: conversions between tapegrad's and xtensor's spelling, and the checks on them.
#include "core/shape.h"

#include <string>

#include "tapegrad/error.h"

namespace tg {
namespace detail {

std::vector<size_t> to_xshape(const Shape& s) { return std::vector<size_t>(s.begin(), s.end()); }

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

bool within_max_elements(const Shape& shape) {
  uint64_t product = 1;
  for (auto d : shape) {
    if (d <= 0) continue;
    if (product > kMaxElements / uint64_t(d)) return false;
    product *= uint64_t(d);
  }
  return true;
}

void check_shape(const Shape& shape, const char* what) {
  for (auto d : shape)
    if (d < 0)
      throw ShapeError(std::string(what) + ": negative dimension in shape " + to_string(shape));
  if (!within_max_elements(shape))
    throw ShapeError(std::string(what) + ": shape " + to_string(shape) +
                     " has too many elements (more than 2^60, whose bytes would not fit in a "
                     "ptrdiff_t)");
}

size_t norm_axis(int64_t axis, size_t rank, const char* op) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r || (r == 0 && axis != 0 && axis != -1))
    throw IndexError(std::string(op) + ": dimension " + std::to_string(axis) +
                     " out of range for a tensor of rank " + std::to_string(rank) +
                     " (expected [" + std::to_string(-r) + ", " + std::to_string(r - 1) + "])");
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

}  // namespace detail
}  // namespace tg
