// The helpers every op shares: broadcasting, axis splits, shape errors.
#include "ops/common.h"

#include <algorithm>
#include <cmath>

#include "backend/parallel.h"

namespace tg {
namespace detail {

template <class T>
std::vector<T> broadcast_values(const Tensor& t, const Shape& target) {
  std::vector<T> v = values_as<T>(*t.impl());
  const Shape s = t.shape();
  if (s == target) return v;
  const std::vector<int64_t> at = strided_offsets(target, broadcast_strides(s, target));
  std::vector<T> out(at.size());
  for (size_t i = 0; i < at.size(); ++i) out[i] = v[static_cast<size_t>(at[i])];
  return out;
}
template std::vector<float> broadcast_values<float>(const Tensor&, const Shape&);
template std::vector<int64_t> broadcast_values<int64_t>(const Tensor&, const Shape&);
template std::vector<uint8_t> broadcast_values<uint8_t>(const Tensor&, const Shape&);

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

std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& target, int64_t inner) {
  const size_t n = target.size(), lead = n - shape.size();
  std::vector<int64_t> stride(n, 0);
  int64_t st = inner;
  for (size_t i = n; i-- > lead;) {
    const int64_t d = shape[i - lead];
    stride[i] = d == 1 ? 0 : st;
    st *= d;
  }
  return stride;
}

std::vector<int64_t> strided_offsets(const Shape& dims, const std::vector<int64_t>& strides) {
  const size_t n = dims.size();
  const int64_t count = numel_of(dims);
  std::vector<int64_t> off(static_cast<size_t>(count));
  std::vector<int64_t> idx(n, 0);
  int64_t cur = 0;
  for (int64_t k = 0; k < count; ++k) {
    off[static_cast<size_t>(k)] = cur;
    for (size_t i = n; i-- > 0;) {  // the odometer: bump the last dim, carry into the ones before
      if (++idx[i] < dims[i]) {
        cur += strides[i];
        break;
      }
      cur -= strides[i] * (dims[i] - 1);
      idx[i] = 0;
    }
  }
  return off;
}

MatrixLayout matrix_layout(int64_t rows, int64_t cols, int64_t s_row, int64_t s_col) {
  // A dim of size 1 is never stepped, so its stride is free.
  if ((cols == 1 || s_col == 1) && (rows == 1 || s_row >= cols))
    return {true, false, rows == 1 ? std::max<int64_t>(cols, 1) : s_row};
  if ((rows == 1 || s_row == 1) && (cols == 1 || s_col >= rows))
    return {true, true, cols == 1 ? std::max<int64_t>(rows, 1) : s_col};
  return {};
}

MatrixLayout as_matrix(const TensorImpl& t) {
  const size_t r = t.shape().size();
  if (r == 0) return {};
  const int64_t cols = static_cast<int64_t>(t.shape()[r - 1]);
  if (t.contiguous()) return {true, false, std::max<int64_t>(cols, 1)};
  if (r == 1) return matrix_layout(1, cols, cols, t.strides()[0]);
  int64_t rows = 1;
  std::vector<size_t> stepped;  // the leading dims longer than 1 (a size-1 dim's stride is free)
  for (size_t d = 0; d + 1 < r; ++d) {
    rows *= static_cast<int64_t>(t.shape()[d]);
    if (t.shape()[d] != 1) stepped.push_back(d);
  }
  // They must merge into one: each steps over the whole of the next.
  for (size_t k = 0; k + 1 < stepped.size(); ++k)
    if (t.strides()[stepped[k]] !=
        t.strides()[stepped[k + 1]] * static_cast<int64_t>(t.shape()[stepped[k + 1]]))
      return {};
  const int64_t s_row = stepped.empty() ? cols : t.strides()[stepped.back()];
  return matrix_layout(rows, cols, s_row, t.strides()[r - 1]);
}

Array softmax_backward(const View& y, const Array& g, const AxisSplit& s, bool log) {
  Array gx = Array::from_shape(y.shape());
  const float *py = y.data(), *pg = g.data();
  float* out = gx.data();
  for_each_row(s.outer, s.n * s.inner, kGrain / 4, [&](size_t o) {  // rows split across threads
    for (size_t j = 0; j < s.inner; ++j) {
      const size_t base = o * s.n * s.inner + j;
      float acc = 0;  // Σ g y, or Σ g
      for (size_t i = 0; i < s.n; ++i) acc += pg[base + i * s.inner] * (log ? 1.0f : py[base + i * s.inner]);
      for (size_t i = 0; i < s.n; ++i) {
        const size_t k = base + i * s.inner;
        out[k] = log ? pg[k] - std::exp(py[k]) * acc : py[k] * (pg[k] - acc);
      }
    }
  });
  return gx;
}

}  // namespace detail
}  // namespace tg
