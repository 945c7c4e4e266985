// tg::Tensor's methods, the factories and printing.
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include <xtensor/xbuilder.hpp>
#include <xtensor/xio.hpp>

#include "core/shape.h"
#include "core/storage.h"
#include "tapegrad/random.h"

namespace tg {
using namespace detail;

Tensor detail::make_leaf(Array value, bool requires_grad) {
  auto impl = impl_over(make_storage(std::move(value)));
  impl->requires_grad = requires_grad;
  return Tensor(std::move(impl));
}

std::string to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---- DataView ------------------------------------------------------------------------------

DataView::DataView(float* ptr, Shape shape) : ptr_(ptr), shape_(std::move(shape)) {}

int64_t DataView::size() const { return numel_of(shape_); }

float& DataView::operator[](int64_t i) const {
  if (i < 0 || i >= size())
    throw IndexError("DataView: flat index " + std::to_string(i) + " out of range for " +
                     std::to_string(size()) + " elements");
  return ptr_[i];
}

float& DataView::at(const int64_t* index, size_t rank) const {
  if (rank != shape_.size())
    throw IndexError("DataView: " + std::to_string(rank) + " indices given for a tensor of shape " +
                     to_string(shape_));
  int64_t flat = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (index[d] < 0 || index[d] >= shape_[d])
      throw IndexError("DataView: index " + std::to_string(index[d]) + " out of range for dim " +
                       std::to_string(d) + " of shape " + to_string(shape_));
    flat = flat * shape_[d] + index[d];
  }
  return ptr_[flat];
}

void DataView::fill(float value) const { std::fill(begin(), end(), value); }

void DataView::assign(const std::vector<float>& values) const {
  if (static_cast<int64_t>(values.size()) != size())
    throw ShapeError("DataView::assign: " + std::to_string(values.size()) +
                     " values for a tensor of shape " + to_string(shape_) + " (" +
                     std::to_string(size()) + " elements)");
  std::copy(values.begin(), values.end(), begin());
}

// ---- Tensor ------------------------------------------------------------------------------

Shape Tensor::shape() const {
  const auto& s = checked(impl_, "shape").shape();
  return Shape(s.begin(), s.end());
}
int64_t Tensor::dim() const { return static_cast<int64_t>(checked(impl_, "dim").shape().size()); }
int64_t Tensor::size(int64_t d) const {
  const Shape s = shape();
  return s[norm_axis(d, s.size(), "size")];
}
int64_t Tensor::numel() const { return static_cast<int64_t>(checked(impl_, "numel").numel()); }

Shape Tensor::strides() const {
  const auto s = checked(impl_, "strides").strides();
  return Shape(s.begin(), s.end());
}
int64_t Tensor::storage_offset() const { return checked(impl_, "storage_offset").offset(); }
bool Tensor::is_contiguous() const {
  const TensorImpl& impl = checked(impl_, "is_contiguous");
  return impl.contiguous() || (impl.dtype() != DType::Float32 && row_major(impl));
}

namespace {
/// The float readers' check: an int64 or bool tensor is read with to_vector<T>() or item<T>().
const TensorImpl& float_only(const std::shared_ptr<TensorImpl>& p, const char* what) {
  const TensorImpl& impl = checked(p, what);
  if (impl.dtype() != DType::Float32)
    throw TypeError(std::string(what) + ": the tensor is " + dtype_name(impl.dtype()) +
                    ", not float32; read it with to_vector<int64_t>() or item<int64_t>() (or "
                    "<bool>)");
  return impl;
}
}  // namespace

DataView Tensor::data() const { return DataView(data_ptr(), shape()); }
float* Tensor::data_ptr() const {
  if (!float_only(impl_, "data_ptr").contiguous())
    throw ValueError("data_ptr: the tensor (shape " + tg::to_string(shape()) + ", strides " +
                     tg::to_string(strides()) +
                     ") is not contiguous, so its elements are not one row-major block; call "
                     "contiguous() first (a copy)");
  impl_->storage->raw_access.fetch_add(1, std::memory_order_relaxed);  // device copies go stale
  return impl_->ptr();
}

std::vector<float> Tensor::to_vector() const {
  const TensorImpl& impl = float_only(impl_, "to_vector");
  if (impl.view) return std::vector<float>(impl.view->begin(), impl.view->end());
  const Array a = dense_copy(impl);
  return std::vector<float>(a.begin(), a.end());
}

float Tensor::item() const {
  const TensorImpl& impl = float_only(impl_, "item");
  if (impl.numel() != 1)
    throw ShapeError("item: a tensor with one element was expected, got shape " +
                     tg::to_string(shape()));
  return *impl.ptr();
}










Tensor Tensor::detach() const {
  const TensorImpl& self = checked(impl_, "detach");
  auto impl = new_impl();
  impl->storage = self.storage;  // shares the values and their version
  if (self.vi)  // the same geometry; not a view of self's base (a detached tensor has no history)
    set_geometry(*impl, self.vi->shape, self.vi->strides, self.vi->offset);
  else
    set_whole(*impl);
  return Tensor(std::move(impl));
}

Tensor Tensor::clone() const { return dense_clone(checked(impl_, "clone")); }

std::string Tensor::to_string() const {
  if (!impl_) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(shape=" << tg::to_string(shape());
  if (impl_->dtype() != DType::Float32) {  // printed as xtensor prints the float ones
    os << ", dtype=" << dtype_name(impl_->dtype()) << ")\n";
    const auto v = values_as<int64_t>(*impl_);
    const auto xs = impl_->shape();
    os << xt::adapt(v, std::vector<size_t>(xs.begin(), xs.end()));
    return os.str();
  }
  if (!is_leaf()) os << ", op=" << op_name();
  else if (impl_->requires_grad) os << ", requires_grad";
  os << ")\n" << dense_copy(*impl_);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

Indices::Indices(std::vector<int64_t> v, Shape s) : values(std::move(v)), shape(std::move(s)) {
  check_shape(shape, "Indices");  // before numel_of, which could overflow
  if (numel_of(shape) != static_cast<int64_t>(values.size()))
    throw ShapeError("Indices: " + std::to_string(values.size()) + " values for shape " +
                     tg::to_string(shape));
}

Indices::Indices(std::initializer_list<int64_t> v)
    : values(v), shape{static_cast<int64_t>(v.size())} {}

// ---- bridge and factories ---------------------------------------------------------------------

ArrayView& array(const Tensor& t) {
  const TensorImpl& impl = checked(t.impl(), "array");
  ArrayView& whole = impl.storage->data;
  if (impl.dtype() != DType::Float32) not_float(impl);
  if (impl.view != &impl.storage->data)
    throw ValueError("array: the tensor (shape " + tg::to_string(t.shape()) + ", strides " +
                     tg::to_string(t.strides()) + ", offset " + std::to_string(impl.offset()) +
                     ") is a view of part of a larger storage, which has no array of its own; "
                     "call contiguous() or clone() first (a copy)");
  impl.storage->raw_access.fetch_add(1, std::memory_order_relaxed);  // device copies go stale
  return whole;
}
Tensor from_array(Array values, bool requires_grad) {
  return make_leaf(std::move(values), requires_grad);
}

namespace {
Array filled(const Shape& shape, float v, const char* what) {
  check_shape(shape, what);
  Array a = Array::from_shape(to_xshape(shape));
  a.fill(v);
  return a;
}
}  // namespace

Tensor tensor(const std::vector<float>& values, const Shape& shape, bool requires_grad) {
  check_shape(shape, "tensor");
  if (numel_of(shape) != static_cast<int64_t>(values.size()))
    throw ShapeError("tensor: " + std::to_string(values.size()) + " values for shape " +
                     to_string(shape) + " (" + std::to_string(numel_of(shape)) + " elements)");
  Array a = Array::from_shape(to_xshape(shape));
  std::copy(values.begin(), values.end(), a.begin());
  return make_leaf(std::move(a), requires_grad);
}

Tensor tensor(std::initializer_list<float> values, bool requires_grad) {
  return tensor(std::vector<float>(values), Shape{static_cast<int64_t>(values.size())},
                requires_grad);
}

Tensor tensor(std::initializer_list<std::initializer_list<float>> rows, bool requires_grad) {
  std::vector<float> v;
  const int64_t cols = rows.size() ? static_cast<int64_t>(rows.begin()->size()) : 0;
  for (const auto& r : rows) {
    if (static_cast<int64_t>(r.size()) != cols)
      throw ShapeError("tensor: ragged rows (" + std::to_string(r.size()) + " vs " +
                       std::to_string(cols) + " values)");
    v.insert(v.end(), r.begin(), r.end());
  }
  return tensor(v, Shape{static_cast<int64_t>(rows.size()), cols}, requires_grad);
}

Tensor scalar(float value, bool requires_grad) {
  return make_leaf(filled(Shape{}, value, "scalar"), requires_grad);
}
Tensor zeros(const Shape& shape, bool requires_grad) {
  return make_leaf(filled(shape, 0.0f, "zeros"), requires_grad);
}
Tensor ones(const Shape& shape, bool requires_grad) {
  return make_leaf(filled(shape, 1.0f, "ones"), requires_grad);
}
Tensor full(const Shape& shape, float value, bool requires_grad) {
  return make_leaf(filled(shape, value, "full"), requires_grad);
}

Tensor arange(float start, float end, float step) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw ValueError("arange: step must be nonzero and the bounds finite");
  const double count = std::ceil((double(end) - double(start)) / double(step));
  if (count > double(int64_t(1) << 40))  // also keeps the cast below defined
    throw ValueError("arange: [" + std::to_string(start) + ", " + std::to_string(end) + ") in steps of " +
                     std::to_string(step) + " would have " + std::to_string(count) + " elements");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  Array a = Array::from_shape({static_cast<size_t>(n)});
  for (int64_t i = 0; i < n; ++i) a(i) = start + step * static_cast<float>(i);
  return make_leaf(std::move(a));
}


Tensor rand(const Shape& shape, bool requires_grad) {
  Array a = filled(shape, 0.0f, "rand");
  default_generator().fill_uniform(a.data(), static_cast<int64_t>(a.size()));
  return make_leaf(std::move(a), requires_grad);
}

Tensor randn(const Shape& shape, bool requires_grad) {
  Array a = filled(shape, 0.0f, "randn");
  default_generator().fill_normal(a.data(), static_cast<int64_t>(a.size()));
  return make_leaf(std::move(a), requires_grad);
}

}  // namespace tg
