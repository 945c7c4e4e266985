#include "tapegrad/nn/linear.h"

#include "tapegrad/autograd.h"
#include "tapegrad/nn/init.h"
#include "tapegrad/ops.h"

namespace tg {
namespace nn {

Linear::Linear(const LinearOptions& o) : Cloneable("Linear"), options(o) {
  if (o.in_features() <= 0 || o.out_features() <= 0)
    value_error("in_features and out_features must be positive, got " +
                std::to_string(o.in_features()) + " and " + std::to_string(o.out_features()));
  weight = register_parameter("weight", zeros({o.out_features(), o.in_features()}));
  if (o.bias()) bias = register_parameter("bias", zeros({o.out_features()}));
  reset_parameters();
}

void Linear::reset_parameters() {
  init::xavier_uniform_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor Linear::forward(const Tensor& x) {
  const auto scope = this->scope();  // names this module in anomaly reports
  if (!x.defined()) value_error("input is undefined");
  const Shape s = x.shape();
  if (s.empty() || s.back() != options.in_features())
    shape_error("input last dim " + (s.empty() ? std::string("(none: 0-d input)") : std::to_string(s.back())) +
                ", expected " + std::to_string(options.in_features()) + ", input shape " +
                to_string(s));
  return linear(x, weight, bias);
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(options.in_features()) +
         ", out_features=" + std::to_string(options.out_features()) +
         ", bias=" + (options.bias() ? "true" : "false");
}

std::string Linear::signature() const {
  return std::to_string(options.in_features()) + "→" + std::to_string(options.out_features());
}

}  // namespace nn
}  // namespace tg
