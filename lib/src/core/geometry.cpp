// Geometry: the shape, strides and offset through which a tensor sees its storage, and the
// two loops every strided view needs: reading its elements out in row-major order, and
// writing them back.
#include <string>

#include "core/shape.h"
#include "core/storage.h"

namespace tg {
namespace detail {

Strides contiguous_strides(const Array::shape_type& shape) {
  Strides s(shape.size());
  int64_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = step;
    step *= static_cast<int64_t>(shape[d]);
  }
  return s;
}

namespace {
bool is_row_major(const Array::shape_type& shape, const Strides& strides) {
  int64_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != step) return false;  // a size-1 dim's stride is free
    step *= static_cast<int64_t>(shape[d]);
  }
  return true;
}
}  // namespace

void set_geometry(TensorImpl& impl, Array::shape_type shape, Strides strides, int64_t offset) {
  impl.shape = std::move(shape);
  impl.strides = std::move(strides);
  impl.offset = offset;
  impl.view.reset();
  if (is_row_major(impl.shape, impl.strides))
    impl.view.emplace(view_over(impl.storage->data.data() + offset, impl.shape, impl.numel()));
}

void strided_input(const TensorImpl& impl) {
  throw Error("internal error: a kernel that reads contiguous values got a strided view of shape " +
              to_string(Shape(impl.shape.begin(), impl.shape.end())) + "; the op must call dense() on its inputs");
}

namespace {
// Calls f(storage index, row-major index) for every element of the geometry.
template <class F>
void for_each_element(const TensorImpl& impl, F&& f) {
  const size_t rank = impl.shape.size(), n = impl.numel();
  if (n == 0) return;
  if (rank == 0) {
    f(impl.offset, size_t(0));
    return;
  }
  // An odometer over all dims but the last, with the last as an inner loop.
  const int64_t inner = static_cast<int64_t>(impl.shape[rank - 1]);
  const int64_t step = impl.strides[rank - 1];
  xt::svector<size_t, 4> index(rank - 1, 0);
  int64_t base = impl.offset;
  for (size_t flat = 0; flat < n; flat += static_cast<size_t>(inner)) {
    for (int64_t j = 0; j < inner; ++j) f(base + j * step, flat + static_cast<size_t>(j));
    for (size_t d = rank - 1; d-- > 0;) {  // advance the odometer
      base += impl.strides[d];
      if (++index[d] < impl.shape[d]) break;
      base -= impl.strides[d] * static_cast<int64_t>(impl.shape[d]);
      index[d] = 0;
    }
  }
}
}  // namespace

Array dense_copy(const TensorImpl& impl) {
  Array out = Array::from_shape(impl.shape);
  if (impl.view) {
    std::copy(impl.view->begin(), impl.view->end(), out.begin());
    return out;
  }
  const float* src = impl.storage->data.data();
  float* dst = out.data();
  for_each_element(impl, [&](int64_t at, size_t i) { dst[i] = src[at]; });
  return out;
}

void write_dense(const TensorImpl& impl, const float* values) {
  float* dst = impl.storage->data.data();
  for_each_element(impl, [&](int64_t at, size_t i) { dst[at] = values[i]; });
}

}  // namespace detail
}  // namespace tg
