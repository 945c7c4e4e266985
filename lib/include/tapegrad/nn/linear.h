#pragma once
// Linear: y = x Wᵀ + b.  x (..., in) -> (..., out); weight (out, in), bias (out), optional.
// Weight Xavier-uniform and bias zeros by default (PyTorch uses Kaiming-uniform; see README).
#include <memory>

#include "tapegrad/arg.h"
#include "tapegrad/nn/cloneable.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/nn/unary.h"

namespace tg {
namespace nn {

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  TG_ARG(int64_t, in_features);
  TG_ARG(int64_t, out_features);
  /// Learn an additive bias (out).
  TG_ARG(bool, bias) = true;
};

class Linear : public Cloneable<Linear, UnaryModule> {
 public:
  explicit Linear(const LinearOptions& options);
  Linear(int64_t in_features, int64_t out_features) : Linear(LinearOptions(in_features, out_features)) {}

  /// (..., in) -> (..., out)
  Tensor forward(const Tensor& x) override;
  /// Re-draws the weight (Xavier-uniform) and zeroes the bias.
  void reset_parameters();

  std::string extra_repr() const override;
  std::string signature() const override;

  LinearOptions options;
  Tensor weight;  // (out, in)
  Tensor bias;    // (out), undefined without bias
};

}  // namespace nn
}  // namespace tg
