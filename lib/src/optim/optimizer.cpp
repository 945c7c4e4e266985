// The Optimizer base: parameter groups, zero_grad/step, and the state dict.
#include <cxxabi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "core/storage.h"
#include "tapegrad/autograd.h"
#include "tapegrad/optim/optimizer.h"

namespace tg {
namespace optim {

// ---- OptimizerOptions -------------------------------------------------------------------------

std::vector<std::pair<std::string, double>> OptimizerOptions::to_numbers() const {
  std::vector<std::pair<std::string, double>> out;
  // fields() hands out pointers that could write; here they are only read.
  for (const Field& f : const_cast<OptimizerOptions*>(this)->fields())
    out.emplace_back(f.name, f.number ? *f.number : *f.flag ? 1.0 : 0.0);
  return out;
}

void OptimizerOptions::set_number(const std::string& name, double value) {
  const std::vector<Field> table = fields();
  for (const Field& f : table) {
    if (name != f.name) continue;
    if (f.number) *f.number = value;
    else *f.flag = value != 0;
    return;
  }
  std::string names;
  for (const Field& f : table) names += (names.empty() ? "" : ", ") + std::string(f.name);
  throw ValueError(std::string(optimizer_name()) + " has no option '" + name + "' (options: " +
                   names + ")");
}

void OptimizerOptions::wrong_type(const OptimizerOptions& options, const std::type_info& want) {
  int status = 0;
  char* name = abi::__cxa_demangle(want.name(), nullptr, nullptr, &status);
  const std::string wanted = status == 0 && name ? name : want.name();
  std::free(name);
  throw ValueError(std::string("these options are ") + options.optimizer_name() +
                   "'s, not " + wanted);
}

void OptimizerOptions::check_nonnegative(const char* name, double v) {
  if (!(v >= 0) || std::isinf(v))
    throw ValueError(std::string("invalid ") + name + " " + std::to_string(v) +
                     ", expected a finite value >= 0");
}

// ---- ParamGroup ---------------------------------------------------------------------------

ParamGroup::ParamGroup(std::vector<Tensor> params) : params_(std::move(params)) {}

ParamGroup::ParamGroup(std::vector<Tensor> params, const OptimizerOptions& options)
    : params_(std::move(params)), options_(options.clone()) {}

ParamGroup::ParamGroup(std::vector<Tensor> params, std::map<std::string, double> overrides)
    : params_(std::move(params)), overrides_(std::move(overrides)) {}

ParamGroup::ParamGroup(const ParamGroup& o)
    : params_(o.params_), options_(o.options_ ? o.options_->clone() : nullptr),
      overrides_(o.overrides_) {}

ParamGroup& ParamGroup::operator=(const ParamGroup& o) {
  if (this != &o) {
    params_ = o.params_;
    options_ = o.options_ ? o.options_->clone() : nullptr;
    overrides_ = o.overrides_;
  }
  return *this;
}

OptimizerOptions& ParamGroup::options() {
  if (!options_) throw ValueError("ParamGroup: no options yet (the group is not in an optimizer)");
  return *options_;
}
const OptimizerOptions& ParamGroup::options() const {
  if (!options_) throw ValueError("ParamGroup: no options yet (the group is not in an optimizer)");
  return *options_;
}

// ---- Optimizer ----------------------------------------------------------------------------

Optimizer::Optimizer(std::string type_name, const OptimizerOptions& defaults)
    : type_name_(std::move(type_name)), defaults_(defaults.clone()) {
  try {
    defaults_->validate();
  } catch (const ValueError& e) {
    throw ValueError(type_name_ + ": " + e.what());
  }
}

void Optimizer::add_param_group(const ParamGroup& group) {
  const std::string where =
      type_name_ + ": param group " + std::to_string(groups_.size()) + ": ";
  ParamGroup g(group.params_);
  if (group.options_) {
    if (std::string(group.options_->optimizer_name()) != type_name_)
      throw ValueError(where + "options are for " + group.options_->optimizer_name() +
                       ", not " + type_name_);
    g.options_ = group.options_->clone();
  } else {
    g.options_ = defaults_->clone();
  }
  try {
    for (const auto& [name, value] : group.overrides_) g.options_->set_number(name, value);
    g.options_->validate();
  } catch (const ValueError& e) {
    throw ValueError(where + e.what());
  }
  std::set<const void*> seen;
  for (const auto& grp : groups_)
    for (const auto& p : grp.params_) seen.insert(p.impl().get());
  for (size_t i = 0; i < g.params_.size(); ++i) {
    const Tensor& p = g.params_[i];
    const std::string which = where + "parameter " + std::to_string(i);
    if (!p.defined()) throw ValueError(which + " is undefined");
    if (!p.is_leaf())
      throw ValueError(which + " is not a leaf (it came out of op '" + p.op_name() +
                       "'); only leaves can be optimized");
    if (!seen.insert(p.impl().get()).second)
      throw ValueError(which + " appears more than once (in this or another group)");
  }
  groups_.push_back(std::move(g));
}

void Optimizer::add_param_groups(const std::vector<ParamGroup>& groups) {
  if (std::all_of(groups.begin(), groups.end(), [](const ParamGroup& g) { return g.params().empty(); }))
    throw ValueError(type_name_ +
                     ": got an empty parameter list (no groups, or groups without parameters)");
  for (const auto& g : groups) add_param_group(g);
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& g : groups_)
    for (auto& p : g.params_) {
      if (set_to_none)
        p.set_grad(Tensor());
      else
        p.zero_grad();
    }
}

Tensor Optimizer::step(const LossClosure& closure) {
  Tensor loss;
  if (closure) {
    const bool mode = is_grad_enabled();  // the closure runs backward: grad mode on
    set_grad_enabled(true);
    struct Restore {
      bool mode;
      ~Restore() { set_grad_enabled(mode); }
    } restore{mode};
    loss = closure();
  }
  NoGradGuard no_grad;
  for (auto& g : groups_)
    for (auto& p : g.params_)
      if (p.grad().defined()) {
        update(*g.options_, p, state_[p.impl().get()]);
        detail::bump_version(p);  // a graph that saved p must not run with the stepped value
      }
  return loss;
}

const ParamState* Optimizer::state(const Tensor& param) const {
  auto it = state_.find(param.impl().get());
  return it == state_.end() ? nullptr : &it->second;
}

StateDict Optimizer::state_dict() const {
  StateDict d;
  d.strings["type"] = type_name_;
  d.numbers["num_param_groups"] = static_cast<double>(groups_.size());
  int64_t index = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const std::string gp = "param_groups." + std::to_string(gi) + ".";
    d.numbers[gp + "num_params"] = static_cast<double>(groups_[gi].params_.size());
    for (const auto& [name, value] : groups_[gi].options_->to_numbers()) d.numbers[gp + name] = value;
    for (const auto& p : groups_[gi].params_) {
      auto it = state_.find(p.impl().get());
      const std::string sp = "state." + std::to_string(index++) + ".";
      if (it == state_.end()) continue;
      for (const auto& [name, value] : it->second.numbers) d.numbers[sp + name] = value;
      for (const auto& [name, t] : it->second.tensors) d.tensors[sp + name] = t.clone();
    }
  }
  return d;
}

namespace {
[[noreturn]] void bad(const std::string& owner, const std::string& what) {
  throw CheckpointError(owner + ".load_state_dict: " + what);
}

bool is_count(double v) { return v >= 0 && v <= 9.007199254740992e15 && std::floor(v) == v; }

/// "state.12.exp_avg" -> (12, "exp_avg"); false if the key is not of that form.
bool parse_state_key(const std::string& key, int64_t& index, std::string& name) {
  const std::string prefix = "state.";
  if (key.compare(0, prefix.size(), prefix) != 0) return false;
  const size_t dot = key.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size() || dot + 1 == key.size()) return false;
  const std::string num = key.substr(prefix.size(), dot - prefix.size());
  if (!std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      num.size() > 15)
    return false;
  index = std::stoll(num);
  name = key.substr(dot + 1);
  return true;
}
}  // namespace

void Optimizer::load_state_dict(const StateDict& dict) {
  const std::string& owner = type_name_;
  // Type and group structure.
  const std::string& type = dict.string_at("type", owner);
  if (type != type_name_)
    bad(owner, "key 'type': the state is for a " + type + " optimizer, this is " + type_name_);
  for (const auto& [key, value] : dict.strings)
    if (key != "type") bad(owner, "unexpected string key '" + key + "'");

  std::set<std::string> known_numbers = {"num_param_groups"};
  const double ngroups = dict.number_at("num_param_groups", owner);
  if (ngroups != static_cast<double>(groups_.size()))
    bad(owner, "key 'num_param_groups': expected " + std::to_string(groups_.size()) +
                   " groups, the state has " + std::to_string(ngroups));

  // Options of every group, built on copies.
  std::vector<std::unique_ptr<OptimizerOptions>> options;
  std::vector<const Tensor*> params;     // global parameter index -> parameter
  std::vector<size_t> group_of;          // global parameter index -> group
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const std::string gp = "param_groups." + std::to_string(gi) + ".";
    const double n = dict.number_at(gp + "num_params", owner);
    known_numbers.insert(gp + "num_params");
    if (n != static_cast<double>(groups_[gi].params_.size()))
      bad(owner, "key '" + gp + "num_params': expected " +
                     std::to_string(groups_[gi].params_.size()) + " parameters, the state has " +
                     std::to_string(n));
    auto o = groups_[gi].options_->clone();
    for (const auto& [name, current] : o->to_numbers()) {
      (void)current;
      const std::string key = gp + name;
      known_numbers.insert(key);
      const double v = dict.number_at(key, owner);
      try {
        o->set_number(name, v);
      } catch (const ValueError& e) {
        bad(owner, "key '" + key + "': " + e.what());
      }
    }
    try {
      o->validate();
    } catch (const ValueError& e) {
      bad(owner, "group " + std::to_string(gi) + " ('" + gp + "*'): " + e.what());
    }
    options.push_back(std::move(o));
    for (const auto& p : groups_[gi].params_) {
      params.push_back(&p);
      group_of.push_back(gi);
    }
  }

  // Per-parameter state: collect, then check against what each parameter must hold.
  std::map<int64_t, ParamState> loaded;
  for (const auto& [key, value] : dict.numbers) {
    if (known_numbers.count(key)) continue;
    int64_t i;
    std::string name;
    if (!parse_state_key(key, i, name)) bad(owner, "unexpected number key '" + key + "'");
    if (i >= static_cast<int64_t>(params.size()))
      bad(owner, "key '" + key + "': parameter " + std::to_string(i) + " does not exist (" +
                     std::to_string(params.size()) + " parameters)");
    loaded[i].numbers[name] = value;
  }
  for (const auto& [key, t] : dict.tensors) {
    int64_t i;
    std::string name;
    if (!parse_state_key(key, i, name)) bad(owner, "unexpected tensor key '" + key + "'");
    if (i >= static_cast<int64_t>(params.size()))
      bad(owner, "key '" + key + "': parameter " + std::to_string(i) + " does not exist (" +
                     std::to_string(params.size()) + " parameters)");
    if (!t.defined()) bad(owner, "key '" + key + "': the tensor is undefined");
    if (t.shape() != params[i]->shape())
      bad(owner, "key '" + key + "': expected shape " + to_string(params[i]->shape()) +
                     " (the parameter's), got " + to_string(t.shape()));
    loaded[i].tensors[name] = t;
  }
  for (const auto& [i, st] : loaded) {
    std::vector<std::string> numbers, tensors;
    state_names(*options[group_of[i]], numbers, tensors);
    const std::string sp = "state." + std::to_string(i) + ".";
    for (const auto& n : numbers) {
      if (!st.numbers.count(n)) bad(owner, "missing number key '" + sp + n + "'");
      if (!is_count(st.numbers.at(n)))
        bad(owner, "key '" + sp + n + "': expected a count, got " + std::to_string(st.numbers.at(n)));
    }
    for (const auto& n : tensors)
      if (!st.tensors.count(n)) bad(owner, "missing tensor key '" + sp + n + "'");
    for (const auto& [n, v] : st.numbers)
      if (std::find(numbers.begin(), numbers.end(), n) == numbers.end())
        bad(owner, "unexpected number key '" + sp + n + "' for these options");
    for (const auto& [n, v] : st.tensors)
      if (std::find(tensors.begin(), tensors.end(), n) == tensors.end())
        bad(owner, "unexpected tensor key '" + sp + n + "' for these options");
  }

  // Everything fits: commit (copies, so the dict and the optimizer never share buffers).
  std::unordered_map<const void*, ParamState> state;
  for (auto& [i, st] : loaded) {
    ParamState& s = state[params[i]->impl().get()];
    s.numbers = st.numbers;
    for (const auto& [n, t] : st.tensors) s.tensors[n] = t.clone();
  }
  for (size_t gi = 0; gi < groups_.size(); ++gi) groups_[gi].options_ = std::move(options[gi]);
  state_ = std::move(state);
}

}  // namespace optim
}  // namespace tg
