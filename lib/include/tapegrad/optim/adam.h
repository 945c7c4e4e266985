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

/// Options shared by Adam and AdamW (they differ in the default weight decay).
template <class Derived>
struct AdamOptionsBase : OptimizerOptions {
  explicit AdamOptionsBase(double lr, double weight_decay)
      : OptimizerOptions(lr), weight_decay_(weight_decay) {}
  using OptimizerOptions::lr;
  Derived& lr(double v) { lr_ = v; return self(); }
  Derived& betas(std::pair<double, double> v) { beta1_ = v.first; beta2_ = v.second; return self(); }
  Derived& eps(double v) { eps_ = v; return self(); }
  Derived& weight_decay(double v) { weight_decay_ = v; return self(); }
  Derived& amsgrad(bool v) { amsgrad_ = v; return self(); }
  Derived& maximize(bool v) { maximize_ = v; return self(); }

  double beta1_ = 0.9;
  double beta2_ = 0.999;
  double eps_ = 1e-8;
  double weight_decay_;
  bool amsgrad_ = false;
  bool maximize_ = false;

  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
  /// "lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad", "maximize".
  std::vector<std::pair<std::string, double>> to_numbers() const override;
  void set_number(const std::string& name, double value) override;
  /// lr, eps, weight_decay >= 0; betas in [0, 1).
  void validate() const override;

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
};

struct AdamOptions : AdamOptionsBase<AdamOptions> {
  explicit AdamOptions(double lr = 1e-3) : AdamOptionsBase(lr, 0.0) {}
  const char* optimizer_name() const override { return "Adam"; }
};

/// AdamW's default weight decay is 1e-2, as in PyTorch.
struct AdamWOptions : AdamOptionsBase<AdamWOptions> {
  explicit AdamWOptions(double lr = 1e-3) : AdamOptionsBase(lr, 1e-2) {}
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
