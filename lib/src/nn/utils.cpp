// torch.nn.utils.parameters_to_vector / vector_to_parameters.
#include "tapegrad/nn/utils.h"

#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"

namespace tg {
namespace nn {
namespace utils {

// [(s0...), (s1...), ...] -> (Σ numel)
Tensor parameters_to_vector(const std::vector<Tensor>& parameters) {
  if (parameters.empty()) throw ValueError("parameters_to_vector: expected at least one parameter, got none");
  std::vector<Tensor> flat;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (!parameters[i].defined())
      throw ValueError("parameters_to_vector: parameter " + std::to_string(i) + " is undefined");
    flat.push_back(reshape(parameters[i], {parameters[i].numel()}));
  }
  return cat(flat, 0);
}

// (Σ numel) -> each parameter, in place
void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters) {
  if (!vec.defined()) throw ValueError("vector_to_parameters: vec is undefined");
  int64_t total = 0;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (!parameters[i].defined())
      throw ValueError("vector_to_parameters: parameter " + std::to_string(i) + " is undefined");
    total += parameters[i].numel();
  }
  if (vec.dim() != 1 || vec.numel() != total)
    throw ShapeError("vector_to_parameters: expected a vector of shape " + to_string(Shape{total}) +
                     " (the parameters' total size), got " + to_string(vec.shape()));
  NoGradGuard no_grad;
  int64_t offset = 0;
  for (const Tensor& p : parameters) {
    const int64_t n = p.numel();
    if (n > 0) p.copy_(reshape(narrow(vec, 0, offset, n), p.shape()));
    offset += n;
  }
}

}  // namespace utils
}  // namespace nn
}  // namespace tg
