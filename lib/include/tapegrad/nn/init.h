#pragma once
// Initializers, as torch.nn.init defines them. Each fills a tensor in place (no gradient is
// recorded) from the global generator, and returns it.
//
// For a weight of shape (out, in, k...): fan_in = in·prod(k), fan_out = out·prod(k).
#include <string>
#include <utility>

#include "tapegrad/tensor.h"

namespace tg {
namespace nn {
namespace init {

enum class FanMode { FanIn, FanOut };

/// (fan_in, fan_out) of a tensor with at least 2 dims; tg::ValueError otherwise.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);
/// The recommended gain: "linear", "conv1d/2d/3d", "sigmoid" -> 1, "tanh" -> 5/3,
/// "relu" -> √2, "leaky_relu" -> √(2 / (1 + param²)), "selu" -> 3/4.
float calculate_gain(const std::string& nonlinearity, float param = 0.01f);

Tensor uniform_(const Tensor& t, float a = 0.0f, float b = 1.0f);
Tensor normal_(const Tensor& t, float mean = 0.0f, float std = 1.0f);
Tensor constant_(const Tensor& t, float value);
Tensor zeros_(const Tensor& t);
Tensor ones_(const Tensor& t);
/// U(-bound, bound), bound = gain·√(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(const Tensor& t, float gain = 1.0f);
/// N(0, std²), std = gain·√(2 / (fan_in + fan_out)).
Tensor xavier_normal_(const Tensor& t, float gain = 1.0f);
/// U(-bound, bound), bound = gain·√(3 / fan), gain = calculate_gain(nonlinearity, a).
Tensor kaiming_uniform_(const Tensor& t, float a = 0.0f, FanMode mode = FanMode::FanIn,
                        const std::string& nonlinearity = "leaky_relu");
/// N(0, std²), std = gain / √fan.
Tensor kaiming_normal_(const Tensor& t, float a = 0.0f, FanMode mode = FanMode::FanIn,
                       const std::string& nonlinearity = "leaky_relu");

}  // namespace init
}  // namespace nn
}  // namespace tg
