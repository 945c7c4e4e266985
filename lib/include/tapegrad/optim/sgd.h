#pragma once
// SGD with momentum, dampening, Nesterov momentum and L2 weight decay, exactly as PyTorch
// 1.13 (torch.optim.SGD). With g the gradient (negated if maximize):
//   g ← g + weight_decay·p
//   momentum ≠ 0:  b ← g on the first step, else b ← momentum·b + (1 − dampening)·g
//                  g ← nesterov ? g + momentum·b : b
//   p ← p − lr·g
// State: "momentum_buffer" (only with momentum ≠ 0).
#include "tapegrad/optim/optimizer.h"

namespace tg {
namespace optim {

struct SGDOptions : OptimizerOptionsBase<SGDOptions> {
  SGDOptions(double lr) : lr_(lr) {}  // NOLINT: implicit, so SGD(params, 0.1) reads as LibTorch
  const char* optimizer_name() const override { return "SGD"; }
  /// lr, momentum, dampening, weight_decay >= 0; nesterov needs momentum > 0, dampening 0.
  void validate() const override;

  TG_ARG(double, lr);
  TG_ARG(double, momentum) = 0;
  TG_ARG(double, dampening) = 0;
  TG_ARG(double, weight_decay) = 0;
  TG_ARG(bool, nesterov) = false;
  TG_ARG(bool, maximize) = false;

 protected:
  std::vector<Field> fields() override;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options);
  SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults);

 protected:
  void update(const OptimizerOptions& options, const Tensor& param, ParamState& state) override;
  void state_names(const OptimizerOptions& options, std::vector<std::string>& numbers,
                   std::vector<std::string>& tensors) const override;
};

}  // namespace optim
}  // namespace tg
