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

struct SGDOptions : OptimizerOptions {
  explicit SGDOptions(double lr) : OptimizerOptions(lr) {}
  using OptimizerOptions::lr;
  SGDOptions& lr(double v) { lr_ = v; return *this; }
  SGDOptions& momentum(double v) { momentum_ = v; return *this; }
  SGDOptions& dampening(double v) { dampening_ = v; return *this; }
  SGDOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  SGDOptions& nesterov(bool v) { nesterov_ = v; return *this; }
  SGDOptions& maximize(bool v) { maximize_ = v; return *this; }

  double momentum_ = 0;
  double dampening_ = 0;
  double weight_decay_ = 0;
  bool nesterov_ = false;
  bool maximize_ = false;

  const char* optimizer_name() const override { return "SGD"; }
  std::unique_ptr<OptimizerOptions> clone() const override;
  std::vector<std::pair<std::string, double>> to_numbers() const override;
  void set_number(const std::string& name, double value) override;
  /// lr, momentum, dampening, weight_decay >= 0; nesterov needs momentum > 0, dampening 0.
  void validate() const override;
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
