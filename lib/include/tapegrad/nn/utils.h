#pragma once
// torch.nn.utils: all of a model's parameters as one vector, and back.
//
//   Tensor v = tg::nn::utils::parameters_to_vector(model->parameters());   // (P)
//   tg::nn::utils::vector_to_parameters(v * 0.5f, model->parameters());
#include <vector>

#include "tapegrad/tensor.h"

namespace tg {
namespace nn {
namespace utils {

/// Every parameter flattened and concatenated, in order: (P), P = Σ numel. Recorded, so
/// gradients flow back to the parameters (as PyTorch's torch.cat of views).
/// tg::ValueError for an empty list.
Tensor parameters_to_vector(const std::vector<Tensor>& parameters);
/// Writes consecutive slices of vec (P) into the parameters, in place under no-grad (each
/// write bumps the parameter's version, as an optimizer step). tg::ShapeError unless vec is
/// 1-D with exactly Σ numel elements (PyTorch ignores a longer vector's tail).
void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters);

}  // namespace utils
}  // namespace nn
}  // namespace tg
