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

struct RMSpropOptions : OptimizerOptions {
  explicit RMSpropOptions(double lr = 1e-2) : OptimizerOptions(lr) {}
  using OptimizerOptions::lr;
  RMSpropOptions& lr(double v) { lr_ = v; return *this; }
  RMSpropOptions& alpha(double v) { alpha_ = v; return *this; }
  RMSpropOptions& eps(double v) { eps_ = v; return *this; }
  RMSpropOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  RMSpropOptions& momentum(double v) { momentum_ = v; return *this; }
  RMSpropOptions& centered(bool v) { centered_ = v; return *this; }
  RMSpropOptions& maximize(bool v) { maximize_ = v; return *this; }

  double alpha_ = 0.99;
  double eps_ = 1e-8;
  double weight_decay_ = 0;
  double momentum_ = 0;
  bool centered_ = false;
  bool maximize_ = false;

  const char* optimizer_name() const override { return "RMSprop"; }
  std::unique_ptr<OptimizerOptions> clone() const override;
  std::vector<std::pair<std::string, double>> to_numbers() const override;
  void set_number(const std::string& name, double value) override;
  /// lr, alpha, eps, weight_decay, momentum >= 0.
  void validate() const override;
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
