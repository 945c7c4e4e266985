// torch.nn.init, in place on a tensor's values, drawing from the global generator.
#include <cmath>
#include <vector>

#include "tapegrad/nn/init.h"

#include "core/storage.h"
#include "nn/init_internal.h"
#include "tapegrad/random.h"

namespace tg {
namespace nn {
namespace init {

namespace {
/// (fan_in, fan_out); the error names `who`, the initializer that needed them.
std::pair<int64_t, int64_t> fans(const Tensor& t, const char* who) {
  const Shape s = t.shape();
  if (s.size() < 2)
    throw ValueError(std::string(who) + ": fan in and fan out need a tensor with at least 2 dims, got shape " +
                     to_string(s));
  int64_t receptive = 1;
  for (size_t i = 2; i < s.size(); ++i) receptive *= s[i];
  return {s[1] * receptive, s[0] * receptive};
}
}  // namespace

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  return fans(t, "calculate_fan_in_and_fan_out");
}

double calculate_gain(const std::string& nl, std::optional<double> param) {
  for (const char* linear : {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                             "conv_transpose2d", "conv_transpose3d", "sigmoid", "identity"})
    if (nl == linear) return 1.0;
  if (nl == "tanh") return 5.0 / 3;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") {
    const double slope = param ? *param : 0.01;
    return std::sqrt(2.0 / (1 + slope * slope));
  }
  if (nl == "selu") return 3.0 / 4;
  throw ValueError("calculate_gain: unsupported nonlinearity '" + nl + "'");
}

Tensor uniform_(const Tensor& t, float a, float b) {
  if (!(a <= b)) throw ValueError("uniform_: expected a <= b, got " + std::to_string(a) + " > " + std::to_string(b));
  if (std::isinf(a) || std::isinf(b))
    throw ValueError("uniform_: the bounds must be finite, got [" + std::to_string(a) + ", " + std::to_string(b) + ")");
  default_generator().fill_uniform(t.data_ptr(), t.numel(), a, b);
  detail::bump_version(t);
  return t;
}

Tensor normal_(const Tensor& t, float mean, float std) {
  if (!(std >= 0) || std::isinf(std)) throw ValueError("normal_: std must be finite and >= 0, got " + std::to_string(std));
  if (!std::isfinite(mean)) throw ValueError("normal_: mean must be finite, got " + std::to_string(mean));
  default_generator().fill_normal(t.data_ptr(), t.numel(), mean, std);
  detail::bump_version(t);
  return t;
}

Tensor constant_(const Tensor& t, float value) {
  t.data().fill(value);
  detail::bump_version(t);
  return t;
}
Tensor zeros_(const Tensor& t) { return constant_(t, 0.0f); }
Tensor ones_(const Tensor& t) { return constant_(t, 1.0f); }

Tensor xavier_uniform_(const Tensor& t, float gain) {
  const auto [fan_in, fan_out] = fans(t, "xavier_uniform_");
  const float bound = gain * std::sqrt(6.0f / static_cast<float>(fan_in + fan_out));
  return uniform_(t, -bound, bound);
}

Tensor xavier_normal_(const Tensor& t, float gain) {
  const auto [fan_in, fan_out] = fans(t, "xavier_normal_");
  return normal_(t, 0.0f, gain * std::sqrt(2.0f / static_cast<float>(fan_in + fan_out)));
}

namespace {
float kaiming_std(const Tensor& t, float a, FanMode mode, const std::string& nl, const char* who) {
  const auto [fan_in, fan_out] = fans(t, who);
  const int64_t fan = mode == FanMode::FanIn ? fan_in : fan_out;
  if (fan == 0) throw ValueError(std::string(who) + ": fan is zero for shape " + to_string(t.shape()));
  return static_cast<float>(calculate_gain(nl, a) / std::sqrt(static_cast<double>(fan)));
}
}  // namespace

Tensor kaiming_uniform_(const Tensor& t, float a, FanMode mode, const std::string& nl) {
  const float bound = std::sqrt(3.0f) * kaiming_std(t, a, mode, nl, "kaiming_uniform_");
  return uniform_(t, -bound, bound);
}

Tensor kaiming_normal_(const Tensor& t, float a, FanMode mode, const std::string& nl) {
  return normal_(t, 0.0f, kaiming_std(t, a, mode, nl, "kaiming_normal_"));
}

namespace impl {

// Householder QR of the row-major (m, n) matrix a, m >= n, in place: afterwards the upper
// triangle holds R and v[k] the k-th reflector (I - 2 v vᵀ, |v| = 1, zero above row k).
// Returns Q (m, n) with each column times the sign of R's diagonal entry.
std::vector<double> orthonormal_q(std::vector<double> a, int64_t m, int64_t n) {
  std::vector<std::vector<double>> v(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(m), 0.0));
  std::vector<double> r_diag(static_cast<size_t>(n));
  auto A = [&](int64_t i, int64_t j) -> double& { return a[static_cast<size_t>(i * n + j)]; };
  for (int64_t k = 0; k < n; ++k) {
    auto& vk = v[static_cast<size_t>(k)];
    double norm2 = 0;
    for (int64_t i = k; i < m; ++i) norm2 += A(i, k) * A(i, k);
    const double norm = std::sqrt(norm2);
    // x -> alpha e_k with alpha = -sign(x_k)|x|: no cancellation in v = x - alpha e_k.
    const double alpha = A(k, k) >= 0 ? -norm : norm;
    for (int64_t i = k; i < m; ++i) vk[static_cast<size_t>(i)] = A(i, k);
    vk[static_cast<size_t>(k)] -= alpha;
    double vnorm2 = 0;
    for (int64_t i = k; i < m; ++i) vnorm2 += vk[static_cast<size_t>(i)] * vk[static_cast<size_t>(i)];
    if (vnorm2 > 0) {
      const double inv = 1.0 / std::sqrt(vnorm2);
      for (int64_t i = k; i < m; ++i) vk[static_cast<size_t>(i)] *= inv;
      for (int64_t j = k; j < n; ++j) {  // A[k:, j] -= 2 v (vᵀ A[k:, j])
        double dot = 0;
        for (int64_t i = k; i < m; ++i) dot += vk[static_cast<size_t>(i)] * A(i, j);
        for (int64_t i = k; i < m; ++i) A(i, j) -= 2 * dot * vk[static_cast<size_t>(i)];
      }
    }
    r_diag[static_cast<size_t>(k)] = A(k, k);
  }
  // Q = H_0 ... H_{n-1} I[:, :n], applied from the last reflector back.
  std::vector<double> q(static_cast<size_t>(m * n), 0.0);
  auto Q = [&](int64_t i, int64_t j) -> double& { return q[static_cast<size_t>(i * n + j)]; };
  for (int64_t j = 0; j < n; ++j) Q(j, j) = 1;
  for (int64_t k = n - 1; k >= 0; --k) {
    const auto& vk = v[static_cast<size_t>(k)];
    for (int64_t j = 0; j < n; ++j) {
      double dot = 0;
      for (int64_t i = k; i < m; ++i) dot += vk[static_cast<size_t>(i)] * Q(i, j);
      for (int64_t i = k; i < m; ++i) Q(i, j) -= 2 * dot * vk[static_cast<size_t>(i)];
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    const double d = r_diag[static_cast<size_t>(j)];
    const double s = d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0;  // torch.sign: 0 stays 0
    for (int64_t i = 0; i < m; ++i) Q(i, j) *= s;
  }
  return q;
}

void orthogonal_from_normal(const std::vector<float>& normal, int64_t rows, int64_t cols,
                            double gain, float* out) {
  const bool transposed = rows < cols;
  const int64_t m = transposed ? cols : rows, n = transposed ? rows : cols;
  std::vector<double> a(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      a[static_cast<size_t>(transposed ? j * n + i : i * n + j)] = normal[static_cast<size_t>(i * cols + j)];
  const std::vector<double> q = orthonormal_q(std::move(a), m, n);  // (m, n)
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      out[i * cols + j] = static_cast<float>(gain * q[static_cast<size_t>(transposed ? j * n + i : i * n + j)]);
}

}  // namespace impl

Tensor orthogonal_(const Tensor& t, double gain) {
  if (t.dim() < 2)
    throw ValueError("orthogonal_: only tensors with 2 or more dimensions are supported, got shape " +
                     to_string(t.shape()));
  if (t.numel() == 0) return t;
  const int64_t rows = t.size(0), cols = t.numel() / rows;
  std::vector<float> normal(static_cast<size_t>(rows * cols));
  default_generator().fill_normal(normal.data(), rows * cols);
  impl::orthogonal_from_normal(normal, rows, cols, gain, t.data_ptr());
  detail::bump_version(t);
  return t;
}

}  // namespace init
}  // namespace nn
}  // namespace tg
