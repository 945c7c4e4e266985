#pragma once
// RMSprop, exactly as PyTorch 1.13 (torch.optim.RMSprop). With g the gradient (negated if
// maximize):
//   g ← g + weight_decay·p
//   s ← α·s + (1 − α)·g²
//   centered: ḡ ← α·ḡ + (1 − α)·g,  d ← √(s − ḡ²) + eps;  otherwise d ← √s + eps
//   momentum > 0:  b ← momentum·b + g/d,  p ← p − lr·b;   otherwise p ← p − lr·g/d
// State: "step" (number), "square_avg", "momentum_buffer" (momentum > 0), "grad_avg"
// (centered).
#include "tapegrad/optim/optimizer.h"

namespace tg {
namespace optim {

struct RMSpropOptions : OptimizerOptionsBase<RMSpropOptions> {
  RMSpropOptions(double lr = 1e-2) : lr_(lr) {}  // NOLINT: RMSprop(params, 1e-2)
  const char* optimizer_name() const override { return "RMSprop"; }
  /// lr, alpha, eps, weight_decay, momentum >= 0.
  void validate() const override;

  TG_ARG(double, lr);
  TG_ARG(double, alpha) = 0.99;
  TG_ARG(double, eps) = 1e-8;
  TG_ARG(double, weight_decay) = 0;
  TG_ARG(double, momentum) = 0;
  TG_ARG(bool, centered) = false;
  TG_ARG(bool, maximize) = false;

 protected:
  std::vector<Field> fields() override;
};

class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, const RMSpropOptions& options = RMSpropOptions());
  RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& defaults = RMSpropOptions());

 protected:
  void update(const OptimizerOptions& options, const Tensor& param, ParamState& state) override;
  void state_names(const OptimizerOptions& options, std::vector<std::string>& numbers,
                   std::vector<std::string>& tensors) const override;
};

}  // namespace optim
}  // namespace tg
