// LR schedulers, following torch.optim.lr_scheduler (PyTorch 1.13) step by step.
#include <cmath>
#include <set>

#include "tapegrad/optim/lr_scheduler.h"

namespace tg {
namespace optim {

namespace {
constexpr double kPi = 3.141592653589793;  // math.pi

bool is_int(double v) { return std::isfinite(v) && std::floor(v) == v && std::abs(v) < 9.0e15; }
}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer, std::string type_name)
    : optimizer_(optimizer), type_name_(std::move(type_name)) {
  for (const auto& g : optimizer_.param_groups()) base_lrs_.push_back(g.lr());
}

void LRScheduler::initial_step() { step(); }

void LRScheduler::step() {
  ++last_epoch_;
  const std::vector<double> lrs = get_lr();
  auto& groups = optimizer_.param_groups();
  if (lrs.size() != groups.size() || base_lrs_.size() != groups.size())
    throw ValueError(type_name_ + ": the optimizer has " + std::to_string(groups.size()) +
                     " param groups, the scheduler was made for " +
                     std::to_string(base_lrs_.size()));
  for (size_t i = 0; i < lrs.size(); ++i)
    if (!(lrs[i] >= 0) || std::isinf(lrs[i])) {  // a NaN lr would silently ruin every weight
      const int64_t epoch = last_epoch_--;          // nothing changes
      throw ValueError(type_name_ + ": epoch " + std::to_string(epoch) + " gives group " +
                       std::to_string(i) + " the lr " + std::to_string(lrs[i]) +
                       ", expected a finite value >= 0");
    }
  last_lr_.clear();
  for (size_t i = 0; i < groups.size(); ++i) {
    groups[i].set_lr(lrs[i]);
    last_lr_.push_back(lrs[i]);
  }
}

StateDict LRScheduler::state_dict() const {
  StateDict d;
  d.strings["type"] = type_name_;
  d.numbers["last_epoch"] = static_cast<double>(last_epoch_);
  d.numbers["num_groups"] = static_cast<double>(base_lrs_.size());
  for (size_t i = 0; i < base_lrs_.size(); ++i) {
    d.numbers["base_lrs." + std::to_string(i)] = base_lrs_[i];
    d.numbers["last_lr." + std::to_string(i)] = i < last_lr_.size() ? last_lr_[i] : base_lrs_[i];
  }
  for (const auto& [name, value] : options()) d.numbers[name] = value;
  return d;
}

void LRScheduler::load_state_dict(const StateDict& dict) {
  auto bad = [&](const std::string& what) -> void {
    throw CheckpointError(type_name_ + ".load_state_dict: " + what);
  };
  const std::string& type = dict.string_at("type", type_name_);
  if (type != type_name_) bad("key 'type': the state is for a " + type + ", this is " + type_name_);
  std::set<std::string> known = {"last_epoch", "num_groups"};
  const double last_epoch = dict.number_at("last_epoch", type_name_);
  if (!is_int(last_epoch) || last_epoch < 0)
    bad("key 'last_epoch': expected a count, got " + std::to_string(last_epoch));
  const double n = dict.number_at("num_groups", type_name_);
  const size_t groups = optimizer_.param_groups().size();
  if (n != static_cast<double>(groups))
    bad("key 'num_groups': the optimizer has " + std::to_string(groups) + " groups, the state " +
        std::to_string(n));
  std::vector<double> base(groups), last(groups);
  for (size_t i = 0; i < groups; ++i) {
    const std::string b = "base_lrs." + std::to_string(i), l = "last_lr." + std::to_string(i);
    base[i] = dict.number_at(b, type_name_);
    last[i] = dict.number_at(l, type_name_);
    known.insert(b);
    known.insert(l);
    if (!(base[i] >= 0)) bad("key '" + b + "': expected an lr >= 0, got " + std::to_string(base[i]));
  }
  std::map<std::string, double> opts;
  for (const auto& [name, current] : options()) {
    (void)current;
    opts[name] = dict.number_at(name, type_name_);
    known.insert(name);
  }
  for (const auto& [key, v] : dict.numbers)
    if (!known.count(key)) bad("unexpected number key '" + key + "'");
  if (!dict.tensors.empty()) bad("unexpected tensor key '" + dict.tensors.begin()->first + "'");
  for (const auto& [key, v] : dict.strings)
    if (key != "type") bad("unexpected string key '" + key + "'");
  // Options are checked by the subclass on a trial basis: restore the old ones on failure.
  const auto old = options();
  try {
    set_options(opts);
  } catch (const ValueError& e) {
    std::map<std::string, double> back(old.begin(), old.end());
    set_options(back);
    bad(e.what());
  }
  last_epoch_ = static_cast<int64_t>(last_epoch);
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
}

// ---- StepLR -------------------------------------------------------------------------------

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  set_options({{"step_size", static_cast<double>(step_size)}, {"gamma", gamma}});
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  std::vector<double> lrs;
  for (const auto& g : optimizer_.param_groups())
    lrs.push_back(last_epoch_ == 0 || last_epoch_ % step_size_ != 0 ? g.lr() : g.lr() * gamma_);
  return lrs;
}

std::vector<std::pair<std::string, double>> StepLR::options() const {
  return {{"step_size", static_cast<double>(step_size_)}, {"gamma", gamma_}};
}

void StepLR::set_options(const std::map<std::string, double>& v) {
  const double step_size = v.at("step_size"), gamma = v.at("gamma");
  if (!is_int(step_size) || step_size < 1)
    throw ValueError("StepLR: step_size must be a positive integer, got " + std::to_string(step_size));
  if (!(gamma >= 0)) throw ValueError("StepLR: gamma must be >= 0, got " + std::to_string(gamma));
  step_size_ = static_cast<int64_t>(step_size);
  gamma_ = gamma;
}

// ---- CosineAnnealingLR ------------------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer, "CosineAnnealingLR"), T_max_(T_max), eta_min_(eta_min) {
  set_options({{"T_max", static_cast<double>(T_max)}, {"eta_min", eta_min}});
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  const int64_t e = last_epoch_, T = T_max_;
  std::vector<double> lrs;
  for (size_t i = 0; i < optimizer_.param_groups().size(); ++i) {
    const double lr = optimizer_.param_groups()[i].lr(), base = base_lrs_[i];
    if (e == 0)
      lrs.push_back(lr);
    else if ((e - 1 - T) % (2 * T) == 0)  // the bottom of a period: step back up
      lrs.push_back(lr + (base - eta_min_) * (1 - std::cos(kPi / T)) / 2);
    else
      lrs.push_back((1 + std::cos(kPi * e / T)) / (1 + std::cos(kPi * (e - 1) / T)) *
                        (lr - eta_min_) + eta_min_);
  }
  return lrs;
}

std::vector<std::pair<std::string, double>> CosineAnnealingLR::options() const {
  return {{"T_max", static_cast<double>(T_max_)}, {"eta_min", eta_min_}};
}

void CosineAnnealingLR::set_options(const std::map<std::string, double>& v) {
  const double T = v.at("T_max"), eta_min = v.at("eta_min");
  if (!is_int(T) || T < 1)
    throw ValueError("CosineAnnealingLR: T_max must be a positive integer, got " + std::to_string(T));
  if (!(eta_min >= 0))
    throw ValueError("CosineAnnealingLR: eta_min must be >= 0, got " + std::to_string(eta_min));
  T_max_ = static_cast<int64_t>(T);
  eta_min_ = eta_min;
}

// ---- LambdaLR -----------------------------------------------------------------------------

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda)
    : LRScheduler(optimizer, "LambdaLR"), lambda_(std::move(lr_lambda)) {
  if (!lambda_) throw ValueError("LambdaLR: the lr function is empty");
  initial_step();
}

std::vector<double> LambdaLR::get_lr() {
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(base * lambda_(last_epoch_));
  return lrs;
}

// ---- WarmupCosineLR ---------------------------------------------------------------------------

WarmupCosineLR::WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                               double min_lr_ratio)
    : LRScheduler(optimizer, "WarmupCosineLR"), warmup_(0), total_(1), min_ratio_(0) {
  set_options({{"warmup_steps", static_cast<double>(warmup_steps)},
               {"total_steps", static_cast<double>(total_steps)},
               {"min_lr_ratio", min_lr_ratio}});
  initial_step();
}

double WarmupCosineLR::factor(int64_t e, int64_t W, int64_t T, double r) {
  if (e < W) return static_cast<double>(e + 1) / static_cast<double>(W + 1);
  if (e < T) return r + (1 - r) * 0.5 * (1 + std::cos(kPi * static_cast<double>(e - W) / static_cast<double>(T - W)));
  return r;
}

std::vector<double> WarmupCosineLR::get_lr() {
  const double f = factor(last_epoch_, warmup_, total_, min_ratio_);
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(base * f);
  return lrs;
}

std::vector<std::pair<std::string, double>> WarmupCosineLR::options() const {
  return {{"warmup_steps", static_cast<double>(warmup_)},
          {"total_steps", static_cast<double>(total_)},
          {"min_lr_ratio", min_ratio_}};
}

void WarmupCosineLR::set_options(const std::map<std::string, double>& v) {
  const double W = v.at("warmup_steps"), T = v.at("total_steps"), r = v.at("min_lr_ratio");
  if (!is_int(W) || W < 0)
    throw ValueError("WarmupCosineLR: warmup_steps must be an integer >= 0, got " + std::to_string(W));
  if (!is_int(T) || T <= W)
    throw ValueError("WarmupCosineLR: total_steps must be an integer > warmup_steps (" +
                     std::to_string(W) + "), got " + std::to_string(T));
  if (!(r >= 0 && r <= 1))
    throw ValueError("WarmupCosineLR: min_lr_ratio must be in [0, 1], got " + std::to_string(r));
  warmup_ = static_cast<int64_t>(W);
  total_ = static_cast<int64_t>(T);
  min_ratio_ = r;
}

}  // namespace optim
}  // namespace tg
