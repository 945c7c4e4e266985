#pragma once
// Adam (L2 weight decay folded into the gradient) and AdamW (decoupled weight decay), exactly
// as PyTorch 1.13's single-tensor path. With g the gradient (negated if maximize), t the
// parameter's step count after incrementing it:
//   Adam:   g ← g + weight_decay·p          AdamW:  p ← p·(1 − lr·weight_decay)
//   m ← β1·m + (1 − β1)·g
//   v ← β2·v + (1 − β2)·g²
//   amsgrad: v̂ ← max(v̂, v), and v̂ replaces v below
//   p ← p − (lr / (1 − β1ᵗ)) · m / (√v / √(1 − β2ᵗ) + eps)
// State: "step" (number), "exp_avg", "exp_avg_sq", and "max_exp_avg_sq" with amsgrad.
#include <utility>

#include "tapegrad/optim/optimizer.h"

namespace tg {
namespace optim {

/// Options shared by Adam and AdamW (they differ in the default weight decay). State dicts
/// name the betas "beta1" and "beta2".
template <class Derived>
struct AdamOptionsBase : OptimizerOptionsBase<Derived> {
  using Betas = std::pair<double, double>;
  AdamOptionsBase(double lr, double weight_decay) : lr_(lr), weight_decay_(weight_decay) {}
  /// lr, eps, weight_decay >= 0; betas in [0, 1).
  void validate() const override;

  TG_ARG_RETURNING(Derived&, double, lr);
  TG_ARG_RETURNING(Derived&, Betas, betas) = {0.9, 0.999};
  TG_ARG_RETURNING(Derived&, double, eps) = 1e-8;
  TG_ARG_RETURNING(Derived&, double, weight_decay);
  TG_ARG_RETURNING(Derived&, bool, amsgrad) = false;
  TG_ARG_RETURNING(Derived&, bool, maximize) = false;

 protected:
  using Field = OptimizerOptions::Field;
  std::vector<Field> fields() override;
};

struct AdamOptions : AdamOptionsBase<AdamOptions> {
  AdamOptions(double lr = 1e-3) : AdamOptionsBase(lr, 0.0) {}  // NOLINT: Adam(params, 1e-3)
  const char* optimizer_name() const override { return "Adam"; }
};

/// AdamW's default weight decay is 1e-2, as in PyTorch.
struct AdamWOptions : AdamOptionsBase<AdamWOptions> {
  AdamWOptions(double lr = 1e-3) : AdamOptionsBase(lr, 1e-2) {}  // NOLINT: AdamW(params, 1e-3)
  const char* optimizer_name() const override { return "AdamW"; }
};

extern template struct AdamOptionsBase<AdamOptions>;
extern template struct AdamOptionsBase<AdamWOptions>;

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options = AdamOptions());
  Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults = AdamOptions());

 protected:
  void update(const OptimizerOptions& options, const Tensor& param, ParamState& state) override;
  void state_names(const OptimizerOptions& options, std::vector<std::string>& numbers,
                   std::vector<std::string>& tensors) const override;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options = AdamWOptions());
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& defaults = AdamWOptions());

 protected:
  void update(const OptimizerOptions& options, const Tensor& param, ParamState& state) override;
  void state_names(const OptimizerOptions& options, std::vector<std::string>& numbers,
                   std::vector<std::string>& tensors) const override;
};

}  // namespace optim
}  // namespace tg
