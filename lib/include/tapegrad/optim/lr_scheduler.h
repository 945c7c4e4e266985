#pragma once
// Learning-rate schedulers, with PyTorch 1.13's semantics: the constructor records each
// group's lr as its base lr and takes the first step (epoch 0); call step() once after each
// optimizer.step() (or once per epoch). Each step sets every group's lr.
//
// StepLR and CosineAnnealingLR use PyTorch's recursive ("chainable") form, which updates the
// current lr, so their sequences match PyTorch's to the last bit.
//
// State-dict keys: strings "type"; numbers "last_epoch", "num_groups", "base_lrs.<g>",
// "last_lr.<g>" and the scheduler's options ("step_size", "gamma", ...). As in PyTorch, the
// optimizer's lr lives in the optimizer's own state dict: save and restore both.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/optim/optimizer.h"

namespace tg {
namespace optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances one epoch and sets every group's lr.
  void step();
  /// The lrs the last step() set, one per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  /// Epochs stepped so far (0 right after construction).
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  const std::string& type_name() const { return type_name_; }

  StateDict state_dict() const;
  /// Checks the type, group count and options first (tg::CheckpointError naming the key),
  /// then restores; the optimizer's lrs are not touched.
  void load_state_dict(const StateDict& dict);

 protected:
  LRScheduler(Optimizer& optimizer, std::string type_name);
  /// Every subclass constructor ends with this (PyTorch's initial step).
  void initial_step();
  /// The lr of each group at last_epoch_ (already advanced).
  virtual std::vector<double> get_lr() = 0;
  /// The scheduler's own options, by name.
  virtual std::vector<std::pair<std::string, double>> options() const { return {}; }
  /// Sets the options (already checked for presence); throws tg::ValueError if invalid.
  virtual void set_options(const std::map<std::string, double>& values) { (void)values; }

  Optimizer& optimizer_;
  int64_t last_epoch_ = -1;
  std::vector<double> base_lrs_;

 private:
  std::string type_name_;
  std::vector<double> last_lr_;
};

/// lr ← lr·gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;
  std::vector<std::pair<std::string, double>> options() const override;
  void set_options(const std::map<std::string, double>& values) override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// lr_e = eta_min + (base − eta_min)·(1 + cos(π·e / T_max)) / 2, computed recursively as
/// PyTorch does (so it keeps oscillating with period 2·T_max past T_max).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 protected:
  std::vector<double> get_lr() override;
  std::vector<std::pair<std::string, double>> options() const override;
  void set_options(const std::map<std::string, double>& values) override;

 private:
  int64_t T_max_;
  double eta_min_;
};

/// lr_e = base·lambda(e). The function is not saved: construct the scheduler with the same
/// function before loading its state.
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda);

 protected:
  std::vector<double> get_lr() override;

 private:
  std::function<double(int64_t)> lambda_;
};

/// Linear warmup, then cosine decay: lr_e = base·f(e) with W = warmup_steps,
/// T = total_steps, r = min_lr_ratio:
///   e < W:      f = (e + 1) / (W + 1)                          (rises to the peak, never 0)
///   W ≤ e < T:  f = r + (1 − r)·0.5·(1 + cos(π·(e − W) / (T − W)))   (1 at e = W)
///   e ≥ T:      f = r
/// Equal to PyTorch's LambdaLR with this f (the tests compare exactly that).
class WarmupCosineLR : public LRScheduler {
 public:
  WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                 double min_lr_ratio = 0.0);
  /// The factor f(e) above.
  static double factor(int64_t e, int64_t warmup_steps, int64_t total_steps, double min_lr_ratio);

 protected:
  std::vector<double> get_lr() override;
  std::vector<std::pair<std::string, double>> options() const override;
  void set_options(const std::map<std::string, double>& values) override;

 private:
  int64_t warmup_;
  int64_t total_;
  double min_ratio_;
};

}  // namespace optim
}  // namespace tg
