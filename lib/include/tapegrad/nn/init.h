#pragma once
// Initializers, as torch.nn.init defines them. Each fills a tensor in place (no gradient is
// recorded) from the global generator, and returns it.
//
// For a weight of shape (out, in, k...): fan_in = in·prod(k), fan_out = out·prod(k).
#include <optional>
#include <string>
#include <utility>

#include "tapegrad/tensor.h"

namespace tg {
namespace nn {
namespace init {

enum class FanMode { FanIn, FanOut };

/// (fan_in, fan_out) of a tensor with at least 2 dims; tg::ValueError otherwise.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);
/// The recommended gain, in double exactly as PyTorch computes it: "linear", "conv1d/2d/3d",
/// "conv_transpose1d/2d/3d", "sigmoid" -> 1, "tanh" -> 5.0/3, "relu" -> √2.0,
/// "leaky_relu" -> √(2 / (1 + param²)) (param = negative slope, 0.01 if none), "selu" -> 3.0/4.
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);

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
/// A (semi-)orthogonal matrix times gain, as PyTorch: t seen as (rows, cols) = (size(0),
/// numel / size(0)) is filled with Q of the QR decomposition of a N(0, 1) matrix (of its
/// transpose if rows < cols), each column times the sign of R's diagonal; so QᵀQ = I when
/// rows >= cols, QQᵀ = I otherwise. tg::ValueError for fewer than 2 dims.
Tensor orthogonal_(const Tensor& t, double gain = 1.0);

}  // namespace init
}  // namespace nn
}  // namespace tg
