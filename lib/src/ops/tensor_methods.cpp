// Tensor's methods that call an op (tensor.h, "methods mirroring LibTorch"): each is the free
// function of the same name, so x.sum({1}) and tg::sum(x, {1}) are one op on the tape.
#include "tapegrad/ops.h"

namespace tg {

Tensor Tensor::sum() const { return tg::sum(*this); }
Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const { return tg::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return tg::mean(*this); }
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const { return tg::mean(*this, dims, keepdim); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return tg::max(*this, dim, keepdim); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const { return tg::min(*this, dim, keepdim); }
Tensor Tensor::argmax() const { return tg::argmax(*this); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return tg::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin() const { return tg::argmin(*this); }
Tensor Tensor::argmin(int64_t dim, bool keepdim) const { return tg::argmin(*this, dim, keepdim); }

Tensor Tensor::reshape(const Shape& shape) const { return tg::reshape(*this, shape); }
Tensor Tensor::view(const Shape& shape) const { return tg::view(*this, shape); }
Tensor Tensor::t() const { return tg::t(*this); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return tg::transpose(*this, d0, d1); }
Tensor Tensor::permute(const std::vector<int64_t>& dims) const { return tg::permute(*this, dims); }
Tensor Tensor::squeeze() const { return tg::squeeze(*this); }
Tensor Tensor::squeeze(int64_t dim) const { return tg::squeeze(*this, dim); }
Tensor Tensor::unsqueeze(int64_t dim) const { return tg::unsqueeze(*this, dim); }
Tensor Tensor::flatten(int64_t start, int64_t end) const { return tg::flatten(*this, start, end); }
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const { return tg::narrow(*this, dim, start, length); }
Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end) const { return tg::slice(*this, dim, start, end); }
Tensor Tensor::select(int64_t dim, int64_t index) const { return tg::select(*this, dim, index); }
Tensor Tensor::operator[](int64_t index) const { return tg::select(*this, 0, index); }
Tensor Tensor::expand(const Shape& sizes) const { return tg::expand(*this, sizes); }

Tensor Tensor::add(const Tensor& other) const { return tg::add(*this, other); }
Tensor Tensor::sub(const Tensor& other) const { return tg::sub(*this, other); }
Tensor Tensor::mul(const Tensor& other) const { return tg::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return tg::div(*this, other); }
Tensor Tensor::neg() const { return tg::neg(*this); }
Tensor Tensor::pow(float exponent) const { return tg::pow(*this, exponent); }
Tensor Tensor::exp() const { return tg::exp(*this); }
Tensor Tensor::log() const { return tg::log(*this); }
Tensor Tensor::sqrt() const { return tg::sqrt(*this); }
Tensor Tensor::abs() const { return tg::abs(*this); }
Tensor Tensor::tanh() const { return tg::tanh(*this); }
Tensor Tensor::sigmoid() const { return tg::sigmoid(*this); }
Tensor Tensor::relu() const { return tg::relu(*this); }
Tensor Tensor::matmul(const Tensor& other) const { return tg::matmul(*this, other); }
Tensor Tensor::softmax(int64_t dim) const { return tg::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return tg::log_softmax(*this, dim); }
Tensor Tensor::masked_fill(const Tensor& mask, float value) const { return tg::masked_fill(*this, mask, value); }

Tensor Tensor::gt(const Tensor& other) const { return tg::gt(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return tg::lt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return tg::ge(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return tg::le(*this, other); }
Tensor Tensor::eq(const Tensor& other) const { return tg::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return tg::ne(*this, other); }
Tensor Tensor::gt(double s) const { return tg::gt(*this, s); }
Tensor Tensor::lt(double s) const { return tg::lt(*this, s); }
Tensor Tensor::ge(double s) const { return tg::ge(*this, s); }
Tensor Tensor::le(double s) const { return tg::le(*this, s); }
Tensor Tensor::eq(double s) const { return tg::eq(*this, s); }
Tensor Tensor::ne(double s) const { return tg::ne(*this, s); }
Tensor Tensor::logical_not() const { return tg::logical_not(*this); }

// ---- the ops of tapegrad/ops/{reduce,pointwise,combine,create,integer}.h as methods ---------
Tensor Tensor::max() const { return tg::max(*this); }
Tensor Tensor::min() const { return tg::min(*this); }
Tensor Tensor::amax(const std::vector<int64_t>& dims, bool keepdim) const { return tg::amax(*this, dims, keepdim); }
Tensor Tensor::amin(const std::vector<int64_t>& dims, bool keepdim) const { return tg::amin(*this, dims, keepdim); }
Tensor Tensor::all() const { return tg::all(*this); }
Tensor Tensor::any() const { return tg::any(*this); }
Tensor Tensor::all(int64_t dim, bool keepdim) const { return tg::all(*this, dim, keepdim); }
Tensor Tensor::any(int64_t dim, bool keepdim) const { return tg::any(*this, dim, keepdim); }
Tensor Tensor::cumsum(int64_t dim) const { return tg::cumsum(*this, dim); }
Tensor Tensor::logsumexp(const std::vector<int64_t>& dims, bool keepdim) const {
  return tg::logsumexp(*this, dims, keepdim);
}
Tensor Tensor::var(const std::vector<int64_t>& dims, bool unbiased, bool keepdim) const {
  return tg::var(*this, dims, unbiased, keepdim);
}
Tensor Tensor::std(const std::vector<int64_t>& dims, bool unbiased, bool keepdim) const {
  return tg::std(*this, dims, unbiased, keepdim);
}
Tensor Tensor::norm(double p, const std::vector<int64_t>& dims, bool keepdim) const {
  return tg::norm(*this, p, dims, keepdim);
}
Tensor Tensor::prod() const { return tg::prod(*this); }
Tensor Tensor::prod(int64_t dim, bool keepdim) const { return tg::prod(*this, dim, keepdim); }
Tensor Tensor::clamp(std::optional<float> min, std::optional<float> max) const {
  return tg::clamp(*this, min, max);
}
Tensor Tensor::clamp_min(float min) const { return tg::clamp_min(*this, min); }
Tensor Tensor::clamp_max(float max) const { return tg::clamp_max(*this, max); }
Tensor Tensor::sin() const { return tg::sin(*this); }
Tensor Tensor::cos() const { return tg::cos(*this); }
Tensor Tensor::log1p() const { return tg::log1p(*this); }
Tensor Tensor::expm1() const { return tg::expm1(*this); }
Tensor Tensor::reciprocal() const { return tg::reciprocal(*this); }
Tensor Tensor::rsqrt() const { return tg::rsqrt(*this); }
Tensor Tensor::sign() const { return tg::sign(*this); }
Tensor Tensor::round() const { return tg::round(*this); }
Tensor Tensor::floor() const { return tg::floor(*this); }
Tensor Tensor::ceil() const { return tg::ceil(*this); }
Tensor Tensor::pow(const Tensor& exponent) const { return tg::pow(*this, exponent); }
Tensor Tensor::repeat(const Shape& repeats) const { return tg::repeat(*this, repeats); }
Tensor Tensor::flip(const std::vector<int64_t>& dims) const { return tg::flip(*this, dims); }
Tensor Tensor::roll(const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) const {
  return tg::roll(*this, shifts, dims);
}
Tensor Tensor::tril(int64_t diagonal) const { return tg::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return tg::triu(*this, diagonal); }
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const { return tg::chunk(*this, chunks, dim); }
std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const {
  return tg::split(*this, split_size, dim);
}
std::vector<Tensor> Tensor::unbind(int64_t dim) const { return tg::unbind(*this, dim); }

}  // namespace tg
