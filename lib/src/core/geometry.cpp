// Geometry: the shape, strides and offset through which a tensor sees its storage, and the
// two loops every strided view needs: reading its elements out in row-major order, and
// writing them back.
#include <algorithm>
#include <atomic>
#include <string>
#include <type_traits>
#include <vector>

#include "core/shape.h"
#include "core/storage.h"

namespace tg {
namespace detail {

// Ids come from one counter in blocks of 1024 per thread, so a new storage costs no atomic
// operation (the op overhead benchmark counts every nanosecond of a small op).
uint64_t next_storage_id() {
  static std::atomic<uint64_t> next_block{1};
  constexpr uint64_t kBlock = 1024;
  thread_local uint64_t next = 0, end = 0;
  if (next == end) {
    next = next_block.fetch_add(kBlock, std::memory_order_relaxed);
    end = next + kBlock;
  }
  return next++;
}

Strides contiguous_strides(const Array::shape_type& shape) {
  Strides s(shape.size());
  int64_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = step;
    step *= std::max<int64_t>(static_cast<int64_t>(shape[d]), 1);  // as PyTorch, for size 0
  }
  return s;
}

namespace {
bool is_row_major(const Array::shape_type& shape, const Strides& strides) {
  for (auto d : shape)
    if (d == 0) return true;  // no elements: contiguous, as in PyTorch
  int64_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != step) return false;  // a size-1 dim's stride is free
    step *= static_cast<int64_t>(shape[d]);
  }
  return true;
}
}  // namespace

void set_geometry(TensorImpl& impl, Array::shape_type shape, Strides strides, int64_t offset) {
  if (!impl.vi) impl.vi = std::make_unique<ViewInfo>();
  ViewInfo& v = *impl.vi;
  v.shape = std::move(shape);
  v.strides = std::move(strides);
  v.offset = offset;
  v.window.reset();
  impl.view = nullptr;
  Storage& s = *impl.storage;
  if (s.dtype != DType::Float32 || !is_row_major(v.shape, v.strides)) return;  // no float window
  if (offset == 0 && v.shape == s.data.shape()) {
    impl.view = &s.data;
  } else {
    v.window = std::make_unique<View>(view_over(s.data.data() + offset, v.shape, impl.numel()));
    impl.view = v.window.get();
  }
}

void not_float(const TensorImpl& impl) {
  throw TypeError(std::string("expected a float32 tensor, got a ") + dtype_name(impl.dtype()) +
                  " tensor of shape " + to_string(Shape(impl.shape().begin(), impl.shape().end())) +
                  ": this op computes on float values (convert with x.to(tg::kFloat32))");
}

bool row_major(const TensorImpl& impl) { return is_row_major(impl.shape(), impl.strides()); }

void strided_input(const TensorImpl& impl) {
  if (impl.dtype() != DType::Float32) not_float(impl);
  throw Error("internal error: a kernel that reads contiguous values got a strided view of shape " +
              to_string(Shape(impl.shape().begin(), impl.shape().end())) + "; the op must call dense() on its inputs");
}

namespace {
// Calls f(storage index, row-major index) for every element of a geometry.
template <class F>
void for_each_element(const Array::shape_type& shape, const Strides& strides, int64_t offset,
                      F&& f) {
  const size_t rank = shape.size();
  size_t n = 1;
  for (auto d : shape) n *= d;
  if (n == 0) return;
  if (rank == 0) {
    f(offset, size_t(0));
    return;
  }
  // An odometer over all dims but the last, with the last as an inner loop.
  const int64_t inner = static_cast<int64_t>(shape[rank - 1]);
  const int64_t step = strides[rank - 1];
  xt::svector<size_t, 4> index(rank - 1, 0);
  int64_t base = offset;
  for (size_t flat = 0; flat < n; flat += static_cast<size_t>(inner)) {
    for (int64_t j = 0; j < inner; ++j) f(base + j * step, flat + static_cast<size_t>(j));
    for (size_t d = rank - 1; d-- > 0;) {  // advance the odometer
      base += strides[d];
      if (++index[d] < shape[d]) break;
      base -= strides[d] * static_cast<int64_t>(shape[d]);
      index[d] = 0;
    }
  }
}
}  // namespace

void gather(const float* src, const Array::shape_type& shape, const Strides& strides,
            int64_t offset, float* out) {
  for_each_element(shape, strides, offset, [&](int64_t at, size_t i) { out[i] = src[at]; });
}

void scatter(float* dst, const Array::shape_type& shape, const Strides& strides, int64_t offset,
             const float* values) {
  for_each_element(shape, strides, offset, [&](int64_t at, size_t i) { dst[at] = values[i]; });
}

void scatter_add(float* dst, const Array::shape_type& shape, const Strides& strides,
                 int64_t offset, const float* values) {
  for_each_element(shape, strides, offset, [&](int64_t at, size_t i) { dst[at] += values[i]; });
}

bool overlaps(const TensorImpl& impl) {
  if (!impl.vi) return false;
  for (size_t d = 0; d < impl.vi->shape.size(); ++d)
    if (impl.vi->shape[d] > 1 && impl.vi->strides[d] == 0) return true;
  return false;
}

Array dense_copy(const TensorImpl& impl) {
  if (impl.dtype() != DType::Float32) not_float(impl);
  Array out = Array::from_shape(impl.shape());
  if (impl.view)
    std::copy(impl.view->begin(), impl.view->end(), out.begin());
  else
    gather(impl.storage->data.data(), impl.vi->shape, impl.vi->strides, impl.vi->offset, out.data());
  return out;
}

void write_dense(const TensorImpl& impl, const float* values) {
  if (impl.dtype() != DType::Float32) not_float(impl);
  if (impl.view) {
    std::copy(values, values + impl.view->size(), impl.view->begin());
    return;
  }
  scatter(impl.storage->data.data(), impl.vi->shape, impl.vi->strides, impl.vi->offset, values);
}

namespace {
// Every element of `impl` (whose storage holds S) converted to T, in row-major order.
template <class T, class S>
std::vector<T> convert_from(const TensorImpl& impl, const S* src) {
  std::vector<T> out(impl.numel());
  const int64_t offset = impl.offset();
  auto put = [&](int64_t at, size_t i) {
    if constexpr (std::is_same<T, uint8_t>::value) out[i] = src[at] != S(0);  // to bool
    else out[i] = static_cast<T>(src[at]);
  };
  for_each_element(impl.shape(), impl.strides(), offset, put);
  return out;
}
}  // namespace

template <class T>
std::vector<T> values_as(const TensorImpl& impl) {
  const Storage& s = *impl.storage;
  switch (s.dtype) {
    case DType::Int64: return convert_from<T>(impl, s.ints.data());
    case DType::Bool: return convert_from<T>(impl, s.bools.data());
    case DType::Float32: break;
  }
  return convert_from<T>(impl, s.data.data());
}
template std::vector<float> values_as<float>(const TensorImpl&);
template std::vector<int64_t> values_as<int64_t>(const TensorImpl&);
template std::vector<uint8_t> values_as<uint8_t>(const TensorImpl&);
template std::vector<double> values_as<double>(const TensorImpl&);

Tensor dense_clone(const TensorImpl& impl) {
  const Shape shape(impl.shape().begin(), impl.shape().end());
  switch (impl.dtype()) {
    case DType::Int64: return make_int64(values_as<int64_t>(impl), shape);
    case DType::Bool: return make_bool(values_as<uint8_t>(impl), shape);
    case DType::Float32: break;
  }
  return make_leaf(dense_copy(impl));
}

}  // namespace detail
}  // namespace tg
