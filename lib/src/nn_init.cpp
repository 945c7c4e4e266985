// torch.nn.init, in place on a tensor's values, drawing from the global generator.
#include <cmath>

#include "tapegrad/nn/init.h"
#include "tapegrad/random.h"

namespace tg {
namespace nn {
namespace init {

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  const Shape s = t.shape();
  if (s.size() < 2)
    throw ValueError("init: fan in and fan out need a tensor with at least 2 dims, got shape " +
                     to_string(s));
  int64_t receptive = 1;
  for (size_t i = 2; i < s.size(); ++i) receptive *= s[i];
  return {s[1] * receptive, s[0] * receptive};
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
  auto& gen = default_generator();
  for (float& v : t.data()) v = gen.uniform(a, b);
  return t;
}

Tensor normal_(const Tensor& t, float mean, float std) {
  if (!(std >= 0)) throw ValueError("normal_: std must be >= 0, got " + std::to_string(std));
  auto& gen = default_generator();
  for (float& v : t.data()) v = mean + std * gen.normal();
  return t;
}

Tensor constant_(const Tensor& t, float value) {
  t.data().fill(value);
  return t;
}
Tensor zeros_(const Tensor& t) { return constant_(t, 0.0f); }
Tensor ones_(const Tensor& t) { return constant_(t, 1.0f); }

Tensor xavier_uniform_(const Tensor& t, float gain) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const float bound = gain * std::sqrt(6.0f / static_cast<float>(fan_in + fan_out));
  return uniform_(t, -bound, bound);
}

Tensor xavier_normal_(const Tensor& t, float gain) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0.0f, gain * std::sqrt(2.0f / static_cast<float>(fan_in + fan_out)));
}

namespace {
float kaiming_std(const Tensor& t, float a, FanMode mode, const std::string& nl) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const int64_t fan = mode == FanMode::FanIn ? fan_in : fan_out;
  if (fan == 0) throw ValueError("kaiming init: fan is zero for shape " + to_string(t.shape()));
  return calculate_gain(nl, a) / std::sqrt(static_cast<float>(fan));
}
}  // namespace

Tensor kaiming_uniform_(const Tensor& t, float a, FanMode mode, const std::string& nl) {
  const float bound = std::sqrt(3.0f) * kaiming_std(t, a, mode, nl);
  return uniform_(t, -bound, bound);
}

Tensor kaiming_normal_(const Tensor& t, float a, FanMode mode, const std::string& nl) {
  return normal_(t, 0.0f, kaiming_std(t, a, mode, nl));
}

}  // namespace init
}  // namespace nn
}  // namespace tg
