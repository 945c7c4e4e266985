#pragma once
// tg::StateDict: the serializable state of anything that is not a module's parameters:
// optimizers (per-parameter moments, step counts, group options), LR schedulers, training
// counters. Checkpoints store StateDicts generically, so a new optimizer needs no change to
// the checkpoint code.
//
// Keys are dotted strings ("state.3.exp_avg", "param_groups.0.lr"); ordered maps keep the
// serialized bytes deterministic.
#include <cstdint>
#include <map>
#include <string>

#include "tapegrad/tensor.h"

namespace tg {

struct StateDict {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, double> numbers;   // scalars, counts, options (exact up to 2^53)
  std::map<std::string, std::string> strings;

  bool empty() const { return tensors.empty() && numbers.empty() && strings.empty(); }
  /// Lookups that throw tg::CheckpointError naming `owner` and the missing key.
  const Tensor& tensor_at(const std::string& key, const std::string& owner) const;
  double number_at(const std::string& key, const std::string& owner) const;
  const std::string& string_at(const std::string& key, const std::string& owner) const;
};

}  // namespace tg
