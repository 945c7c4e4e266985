// torch.nn.init, in place on a tensor's values, drawing from the global generator.
#include <cmath>

#include "tapegrad/nn/init.h"

#include "core/storage.h"
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

float calculate_gain(const std::string& nl, float param) {
  if (nl == "linear" || nl == "conv1d" || nl == "conv2d" || nl == "conv3d" || nl == "sigmoid" ||
      nl == "identity")
    return 1.0f;
  if (nl == "tanh") return 5.0f / 3.0f;
  if (nl == "relu") return std::sqrt(2.0f);
  if (nl == "leaky_relu") return std::sqrt(2.0f / (1.0f + param * param));
  if (nl == "selu") return 0.75f;
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
  return calculate_gain(nl, a) / std::sqrt(static_cast<float>(fan));
}
}  // namespace

Tensor kaiming_uniform_(const Tensor& t, float a, FanMode mode, const std::string& nl) {
  const float bound = std::sqrt(3.0f) * kaiming_std(t, a, mode, nl, "kaiming_uniform_");
  return uniform_(t, -bound, bound);
}

Tensor kaiming_normal_(const Tensor& t, float a, FanMode mode, const std::string& nl) {
  return normal_(t, 0.0f, kaiming_std(t, a, mode, nl, "kaiming_normal_"));
}

}  // namespace init
}  // namespace nn
}  // namespace tg
