// int64 and bool tensors: their factories, conversions between dtypes, and the readers
// (to_vector<T>, item<T>). Their storage and geometry are core/storage.h's; float kernels
// refuse them through val() and ptr() (not_float, core/geometry.cpp).
#include <cmath>
#include <sstream>

#include "core/shape.h"
#include "core/storage.h"

namespace tg {
using namespace detail;

const char* to_string(Dtype dtype) {
  switch (dtype) {
    case Dtype::Int64: return "int64";
    case Dtype::Bool: return "bool";
    case Dtype::Float32: break;
  }
  return "float32";
}

// ---- making them ----------------------------------------------------------------------------

Tensor detail::make_typed_leaf(std::shared_ptr<Storage> storage, const Shape& shape) {
  auto impl = new_impl();
  impl->storage = std::move(storage);
  const auto xs = to_xshape(shape);
  const Array::shape_type shp(xs.begin(), xs.end());
  set_geometry(*impl, shp, contiguous_strides(shp), 0);
  return Tensor(std::move(impl));
}

namespace {
void check_count(size_t n, const Shape& shape, const char* what) {
  check_shape(shape, what);
  if (numel_of(shape) != static_cast<int64_t>(n))
    throw ShapeError(std::string(what) + ": " + std::to_string(n) + " values for shape " +
                     to_string(shape) + " (" + std::to_string(numel_of(shape)) + " elements)");
}

/// `values` (given as doubles) as a tensor of `dtype`.
Tensor from_numbers(const std::vector<double>& values, const Shape& shape, Dtype dtype,
                    bool requires_grad, const char* what) {
  check_count(values.size(), shape, what);
  if (requires_grad && dtype != Dtype::Float32)
    throw TypeError(std::string(what) + ": only float32 tensors can require gradients, got dtype " +
                    to_string(dtype));
  switch (dtype) {
    case Dtype::Int64: return make_int64(std::vector<int64_t>(values.begin(), values.end()), shape);
    case Dtype::Bool: {
      std::vector<uint8_t> b(values.size());
      for (size_t i = 0; i < b.size(); ++i) b[i] = values[i] != 0;
      return make_bool(std::move(b), shape);
    }
    case Dtype::Float32: break;
  }
  return tensor(std::vector<float>(values.begin(), values.end()), shape, requires_grad);
}
}  // namespace

Tensor detail::make_int64(std::vector<int64_t> values, const Shape& shape) {
  check_count(values.size(), shape, "tensor");
  return make_typed_leaf(std::make_shared<Storage>(std::move(values)), shape);
}

Tensor detail::make_bool(std::vector<uint8_t> values, const Shape& shape) {
  check_count(values.size(), shape, "tensor");
  for (auto& b : values) b = b != 0;
  return make_typed_leaf(std::make_shared<Storage>(std::move(values)), shape);
}

Tensor tensor(const std::vector<int64_t>& values, const Shape& shape, Dtype dtype) {
  check_count(values.size(), shape, "tensor");
  switch (dtype) {
    case Dtype::Int64: return make_int64(values, shape);
    case Dtype::Bool: return make_bool(std::vector<uint8_t>(values.begin(), values.end()), shape);
    case Dtype::Float32: break;
  }
  return tensor(std::vector<float>(values.begin(), values.end()), shape);
}

Tensor tensor(std::initializer_list<int64_t> values, Dtype dtype) {
  return tensor(std::vector<int64_t>(values), Shape{static_cast<int64_t>(values.size())}, dtype);
}

Tensor zeros(const Shape& shape, Dtype dtype, bool requires_grad) {
  return full(shape, 0.0f, dtype, requires_grad);
}
Tensor ones(const Shape& shape, Dtype dtype, bool requires_grad) {
  return full(shape, 1.0f, dtype, requires_grad);
}
Tensor full(const Shape& shape, float value, Dtype dtype, bool requires_grad) {
  check_shape(shape, "full");
  if (dtype == Dtype::Float32) return full(shape, value, requires_grad);
  if (dtype == Dtype::Int64 && !std::isfinite(value))
    throw ValueError("full: " + std::to_string(value) + " cannot be an int64 value");
  return from_numbers(std::vector<double>(static_cast<size_t>(numel_of(shape)), value), shape,
                      dtype, requires_grad, "full");
}

Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype()); }

Tensor arange(double start, double end, double step, Dtype dtype) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw ValueError("arange: step must be nonzero and the bounds finite");
  const double count = std::ceil((end - start) / step);
  if (count > double(int64_t(1) << 40))  // also keeps the cast below defined
    throw ValueError("arange: [" + std::to_string(start) + ", " + std::to_string(end) +
                     ") in steps of " + std::to_string(step) + " would have " +
                     std::to_string(count) + " elements");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  if (dtype == Dtype::Float32) return arange(float(start), float(end), float(step));
  if (dtype == Dtype::Bool) throw TypeError("arange: a bool range is not supported (as in PyTorch)");
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<int64_t>(start + step * double(i));
  return make_int64(std::move(v), Shape{n});
}
Tensor arange(double start, double end, double step) {
  return arange(start, end, step, Dtype::Float32);
}
Tensor arange(int64_t start, int64_t end, int64_t step) {
  if (step == 0) throw ValueError("arange: step must be nonzero");
  const int64_t span = end - start;
  const int64_t n = span == 0 || (span > 0) != (step > 0) ? 0 : (span + step + (step > 0 ? -1 : 1)) / step;
  if (n > (int64_t(1) << 40))
    throw ValueError("arange: [" + std::to_string(start) + ", " + std::to_string(end) +
                     ") in steps of " + std::to_string(step) + " would have " + std::to_string(n) +
                     " elements");
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + step * i;
  return make_int64(std::move(v), Shape{n});
}
Tensor arange(int start, int end, int step) { return arange(int64_t{start}, int64_t{end}, int64_t{step}); }
Tensor arange(int64_t n) { return arange(int64_t{0}, n, int64_t{1}); }
Tensor arange(int n) { return arange(int64_t{0}, int64_t{n}, int64_t{1}); }

// ---- dtype and conversions --------------------------------------------------------------------

Dtype Tensor::dtype() const { return checked(impl_, "dtype").dtype(); }

Tensor Tensor::to(Dtype dtype) const {
  const TensorImpl& impl = checked(impl_, "to");
  if (impl.dtype() == dtype) return *this;
  const Shape s = shape();
  switch (dtype) {
    case Dtype::Int64: return make_int64(values_as<int64_t>(impl), s);
    case Dtype::Bool: return make_bool(values_as<uint8_t>(impl), s);
    case Dtype::Float32: break;
  }
  const std::vector<float> v = values_as<float>(impl);
  return tensor(v, s);
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  const TensorImpl& impl = checked(impl_, "to_vector");
  if constexpr (std::is_same<T, bool>::value) {
    const auto b = values_as<uint8_t>(impl);
    return std::vector<bool>(b.begin(), b.end());
  } else if constexpr (std::is_same<T, float>::value) {
    return values_as<float>(impl);
  } else if (impl.dtype() == DType::Float32) {  // to an integer: toward zero
    const auto v = values_as<double>(impl);
    return std::vector<T>(v.begin(), v.end());
  } else {
    const auto v = values_as<int64_t>(impl);
    return std::vector<T>(v.begin(), v.end());
  }
}

template <class T>
T Tensor::item() const {
  const TensorImpl& impl = checked(impl_, "item");
  if (impl.numel() != 1)
    throw ShapeError("item: a tensor with one element was expected, got shape " +
                     tg::to_string(shape()));
  return to_vector<T>()[0];
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<int> Tensor::to_vector<int>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int64_t Tensor::item<int64_t>() const;
template int Tensor::item<int>() const;
template bool Tensor::item<bool>() const;

// ---- Indices --------------------------------------------------------------------------------

Indices::Indices(const Tensor& t) {
  require_defined(t, "Indices");
  if (t.dtype() != Dtype::Int64)
    throw TypeError(std::string("Indices: expected an int64 tensor, got ") + to_string(t.dtype()));
  values = values_as<int64_t>(*t.impl());
  shape = t.shape();
}

Indices::operator Tensor() const { return make_int64(values, shape); }

}  // namespace tg
