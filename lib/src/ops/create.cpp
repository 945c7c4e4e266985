// Creation ops (eye, linspace, empty, the *_like ones), the triangle masks tril/triu, and the
// whole-tensor comparisons allclose/equal (tapegrad/ops/create.h).
#include <cmath>

#include "ops/common.h"
#include "tapegrad/autograd.h"

namespace tg {
using namespace detail;

Tensor eye(int64_t n, int64_t m, bool requires_grad) {
  if (m == -1) m = n;
  if (n < 0 || m < 0)
    throw ValueError("eye: n and m must be non-negative, got n = " + std::to_string(n) + ", m = " + std::to_string(m));
  Tensor t = zeros({n, m});
  float* p = t.data_ptr();
  for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = 1.0f;
  return t.requires_grad_(requires_grad);
}

Tensor linspace(float start, float end, int64_t steps, bool requires_grad) {
  if (steps < 0) throw ValueError("linspace: number of steps must be non-negative, got " + std::to_string(steps));
  Tensor t = zeros({steps});
  float* p = t.data_ptr();
  if (steps == 1) p[0] = start;
  if (steps > 1) {
    // In float, as PyTorch's CPU kernel: each half counted from its own end, so both ends are exact.
    const float step = (end - start) / static_cast<float>(steps - 1);
    const int64_t halfway = steps / 2;
    for (int64_t i = 0; i < steps; ++i)
      p[i] = i < halfway ? start + step * static_cast<float>(i) : end - step * static_cast<float>(steps - i - 1);
  }
  return t.requires_grad_(requires_grad);
}

Tensor empty(const Shape& shape, bool requires_grad) { return zeros(shape, requires_grad); }

Tensor rand_like(const Tensor& t, bool requires_grad) {
  require_defined(t, "rand_like", "the tensor");
  return rand(t.shape(), requires_grad);
}
Tensor randn_like(const Tensor& t, bool requires_grad) {
  require_defined(t, "randn_like", "the tensor");
  return randn(t.shape(), requires_grad);
}
Tensor full_like(const Tensor& t, float value, bool requires_grad) {
  require_defined(t, "full_like", "the tensor");
  return full(t.shape(), value, requires_grad);
}

namespace {
/// Copies src to dst over (batch, rows, cols), zeroing what the band leaves out.
void band_copy(const float* src, float* dst, size_t batch, int64_t rows, int64_t cols, int64_t k, bool lower) {
  for (size_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const size_t at = (b * static_cast<size_t>(rows) + static_cast<size_t>(i)) * static_cast<size_t>(cols) + static_cast<size_t>(j);
        const bool keep = lower ? j - i <= k : j - i >= k;
        dst[at] = keep ? src[at] : 0.0f;
      }
}

// tril: y = x where j - i <= k, else 0      triu: where j - i >= k      dx = g masked alike
Tensor band(const Tensor& x_arg, int64_t k, bool lower, const char* op) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, op, "the input");
  const Shape in = x.shape();
  if (in.size() < 2) shape_error(op, "expects a tensor with at least 2 dims (..., N, M), got shape " + to_string(in));
  const int64_t rows = in[in.size() - 2], cols = in[in.size() - 1];
  const size_t batch = rows * cols == 0 ? 0 : static_cast<size_t>(x.numel() / (rows * cols));
  Array y = Array::from_shape(val(x).shape());
  band_copy(val(x).data(), y.data(), batch, rows, cols, k, lower);
  return record(op, std::move(y), {x}, [=](BackwardContext& ctx) {
    Array g = Array::from_shape(ctx.grad.shape());
    band_copy(ctx.grad.data(), g.data(), batch, rows, cols, k, lower);
    ctx.give(0, std::move(g));
  });
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return band(x, diagonal, true, "tril"); }
Tensor triu(const Tensor& x, int64_t diagonal) { return band(x, diagonal, false, "triu"); }

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  require_defined(a, "allclose", "a");
  require_defined(b, "allclose", "b");
  if (!(rtol >= 0)) throw ValueError("allclose: rtol must be non-negative, got " + std::to_string(rtol));
  if (!(atol >= 0)) throw ValueError("allclose: atol must be non-negative, got " + std::to_string(atol));
  const Shape s = broadcast_shapes(a.shape(), b.shape(), "allclose");
  std::vector<float> va, vb;
  {
    NoGradGuard no_grad;
    va = expand(a, s).to_vector();
    vb = expand(b, s).to_vector();
  }
  // In float, as PyTorch: |a - b| <= atol + |rtol·b|, for finite values.
  const float rt = static_cast<float>(rtol), at = static_cast<float>(atol);
  for (size_t i = 0; i < va.size(); ++i) {
    const float x = va[i], y = vb[i];
    if (x == y) continue;  // infinities of one sign included
    if (std::isnan(x) || std::isnan(y)) {
      if (equal_nan && std::isnan(x) && std::isnan(y)) continue;
      return false;
    }
    if (std::isinf(x) || std::isinf(y) || !(std::abs(x - y) <= at + std::abs(rt * y))) return false;
  }
  return true;
}

bool equal(const Tensor& a, const Tensor& b) {
  require_defined(a, "equal", "a");
  require_defined(b, "equal", "b");
  if (a.shape() != b.shape()) return false;
  const std::vector<float> va = a.to_vector(), vb = b.to_vector();
  for (size_t i = 0; i < va.size(); ++i)
    if (!(va[i] == vb[i])) return false;
  return true;
}

}  // namespace tg
