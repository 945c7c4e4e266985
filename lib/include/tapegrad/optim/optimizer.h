#pragma once
// tg::optim::Optimizer: the base of every optimizer. Parameters come in groups, each with its
// own options (lr, weight_decay, ...), as in PyTorch; per-parameter state (moments, step
// counts) is created on a parameter's first update and can be saved to and restored from a
// tg::StateDict.
//
//   tg::optim::Adam opt(model->parameters(), tg::optim::AdamOptions(1e-3));   // or (params, 1e-3)
//   opt.zero_grad();  loss.backward();  opt.step();
//   Tensor loss = opt.step([&] { opt.zero_grad(); Tensor l = f(); l.backward(); return l; });
//
// Options are typed: static_cast<AdamOptions&>(opt.param_groups()[0].options()).lr(), or
// checked, opt.param_groups()[0].options<AdamOptions>().lr() and opt.defaults<AdamOptions>().
// A group given a whole options object uses it whole (LibTorch's rule); a group given
// {{"lr", 1e-4}} takes the optimizer's defaults with those fields changed (Python's rule).
//
// State-dict keys (all groups and parameters numbered in order, parameters across groups):
//   strings  "type"                        "Adam"
//   numbers  "num_param_groups"            2
//            "param_groups.<g>.num_params" 3
//            "param_groups.<g>.<option>"   "param_groups.0.lr", "param_groups.1.beta2", ...
//            "state.<i>.<name>"            "state.3.step"
//   tensors  "state.<i>.<name>"            "state.3.exp_avg"
// Parameters that have not been updated yet have no "state.<i>" entries.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tapegrad/arg.h"
#include "tapegrad/error.h"
#include "tapegrad/state_dict.h"
#include "tapegrad/tensor.h"

namespace tg {
namespace optim {

/// Options of one optimizer, as seen by the optimizer's groups, its state dict and the
/// schedulers. Each optimizer's options struct (SGDOptions, ...) derives from
/// OptimizerOptionsBase below and declares its options with TG_ARG; options are also
/// reachable by name, for state dicts and PyTorch-style group overrides (booleans read and
/// write as 0/1), through one table per struct (fields()).
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;

  /// The learning rate of any optimizer (schedulers change it through here).
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
  /// The optimizer these options belong to: "SGD", "Adam", "AdamW", "RMSprop".
  virtual const char* optimizer_name() const = 0;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  /// tg::ValueError naming the first option out of range (negative lr, beta >= 1, ...).
  virtual void validate() const = 0;

  /// Every option by name, in a fixed order, starting with "lr".
  std::vector<std::pair<std::string, double>> to_numbers() const;
  /// Sets one option by name; tg::ValueError for a name these options do not have.
  void set_number(const std::string& name, double value);

  /// `options` as T (SGDOptions, AdamOptions, ...): tg::ValueError if they are not.
  template <class T, class O>
  static T& as(O& options) {
    if (auto* typed = dynamic_cast<T*>(&options)) return *typed;
    wrong_type(options, typeid(std::remove_const_t<T>));
  }

 protected:
  /// One option as state dicts name it, and the member that holds it (a number or a flag).
  struct Field {
    Field(const char* name, double* number) : name(name), number(number) {}
    Field(const char* name, bool* flag) : name(name), flag(flag) {}
    const char* name;
    double* number = nullptr;
    bool* flag = nullptr;
  };
  /// The table behind to_numbers() and set_number(): every option once, "lr" first.
  virtual std::vector<Field> fields() = 0;
  [[noreturn]] static void wrong_type(const OptimizerOptions& options, const std::type_info& want);
  /// ValueError("invalid <name> <v>, expected a finite value >= 0") unless v is one.
  static void check_nonnegative(const char* name, double v);
};

/// The common part of every options struct: clone(), and the learning rate through its own
/// TG_ARG(double, lr).
template <class Derived>
class OptimizerOptionsBase : public OptimizerOptions {
 public:
  double get_lr() const override { return self().lr(); }
  void set_lr(double lr) override { static_cast<Derived&>(*this).lr(lr); }
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<Derived>(self());
  }

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

/// A list of parameters optimized with the same options.
class ParamGroup {
 public:
  /// Uses the optimizer's default options.
  ParamGroup(std::vector<Tensor> params);  // NOLINT: implicit, like a PyTorch list
  /// Uses these options (their type must match the optimizer's).
  ParamGroup(std::vector<Tensor> params, const OptimizerOptions& options);
  /// PyTorch-style overrides of the optimizer's defaults: {{"lr", 0.1}, {"weight_decay", 0}}.
  ParamGroup(std::vector<Tensor> params, std::map<std::string, double> overrides);
  ParamGroup(const ParamGroup& other);
  ParamGroup& operator=(const ParamGroup& other);
  ParamGroup(ParamGroup&&) = default;
  ParamGroup& operator=(ParamGroup&&) = default;

  std::vector<Tensor>& params() { return params_; }
  const std::vector<Tensor>& params() const { return params_; }
  /// The group's options; once the group belongs to an optimizer they are always set.
  /// Schedulers change the lr through here.
  OptimizerOptions& options();
  const OptimizerOptions& options() const;
  /// The options as their own type, checked: opt.param_groups()[0].options<AdamOptions>().
  /// tg::ValueError naming both types if they are another optimizer's.
  template <class T>
  T& options() {
    return OptimizerOptions::as<T>(options());
  }
  template <class T>
  const T& options() const {
    return OptimizerOptions::as<const T>(options());
  }
  bool has_options() const { return options_ != nullptr; }
  double lr() const { return options().get_lr(); }
  void set_lr(double lr) { options().set_lr(lr); }

 private:
  friend class Optimizer;
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
  std::map<std::string, double> overrides_;
};

/// One parameter's state: named numbers ("step") and tensors ("exp_avg"), shaped like it.
struct ParamState {
  std::map<std::string, double> numbers;
  std::map<std::string, Tensor> tensors;
  bool empty() const { return numbers.empty() && tensors.empty(); }
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Adds a group; its options are validated, its parameters must be leaves that are in no
  /// other group (tg::ValueError otherwise).
  void add_param_group(const ParamGroup& group);
  /// Zeroes every parameter's gradient; set_to_none drops the buffers instead.
  void zero_grad(bool set_to_none = false);
  /// Computes the loss for step(closure): typically zero_grad, forward, backward.
  using LossClosure = std::function<Tensor()>;
  /// One update of every parameter that has a gradient (others are skipped, as in PyTorch),
  /// under no-grad. With a closure, first calls it once with grad mode on (it re-evaluates
  /// the model and fills the gradients) and returns what it returned, the loss; without one,
  /// returns an undefined tensor. LibTorch's Tensor step(LossClosure closure = nullptr).
  Tensor step(const LossClosure& closure = nullptr);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  /// The state of one parameter; null before its first update.
  const ParamState* state(const Tensor& param) const;
  /// "SGD", "Adam", ...
  const std::string& type_name() const { return type_name_; }
  /// The options a group without its own starts from. Changing them changes groups added
  /// afterwards, not those already there (as in PyTorch).
  OptimizerOptions& defaults() { return *defaults_; }
  const OptimizerOptions& defaults() const { return *defaults_; }
  /// The same as their own type, checked: opt.defaults<AdamOptions>().betas().
  template <class T>
  T& defaults() {
    return OptimizerOptions::as<T>(*defaults_);
  }
  template <class T>
  const T& defaults() const {
    return OptimizerOptions::as<const T>(*defaults_);
  }

  /// A deep copy of the options and state (see the key list at the top of this file).
  StateDict state_dict() const;
  /// Restores options and state saved by state_dict(). Everything is checked before anything
  /// changes: the optimizer type, the number of groups and of parameters per group, every
  /// option's presence and range, the set of state entries each parameter must have under
  /// its group's options, and each state tensor's shape against its parameter. A mismatch
  /// throws tg::CheckpointError naming the key and leaves the optimizer as it was.
  void load_state_dict(const StateDict& dict);

 protected:
  Optimizer(std::string type_name, const OptimizerOptions& defaults);
  /// What every optimizer's constructor does with its groups: tg::ValueError if none has a
  /// parameter, else add_param_group for each.
  void add_param_groups(const std::vector<ParamGroup>& groups);
  /// One update of `param`, whose gradient is defined; `state` is empty on its first update.
  virtual void update(const OptimizerOptions& options, const Tensor& param, ParamState& state) = 0;
  /// The names of the numbers and tensors a parameter's state holds under `options`.
  virtual void state_names(const OptimizerOptions& options, std::vector<std::string>& numbers,
                           std::vector<std::string>& tensors) const = 0;

 private:
  std::string type_name_;
  std::unique_ptr<OptimizerOptions> defaults_;
  std::vector<ParamGroup> groups_;
  std::unordered_map<const void*, ParamState> state_;  // keyed by the parameter's impl
};

}  // namespace optim
}  // namespace tg
