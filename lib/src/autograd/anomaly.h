#pragma once
// Library-internal, the autograd layer: the hooks of anomaly detection (anomaly.cpp), called
// by the engine as it records and replays. Not installed.
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "autograd/node.h"

namespace tg {
namespace detail {

extern std::atomic<bool> anomaly_flag;
inline bool anomaly_on() { return anomaly_flag.load(std::memory_order_relaxed); }
/// The id of the innermost ModuleScope on this thread (0: none).
uint32_t current_module_id();
/// Throws AnomalyError if op `name`'s output holds NaN (or Inf from finite inputs).
void check_forward(const char* name, const Tensor& output, const Tensor* inputs, size_t n);
/// Throws AnomalyError if `g`, the gradient `node` gives its input i, holds NaN or Inf.
/// `grad_out` is the gradient the node received (may be empty if the closure took it).
void check_gradient(const Node& node, size_t i, const Array& g, const Array& grad_out);
/// Throws AnomalyError if the gradient backward() starts from holds NaN or Inf.
void check_seed(const Node* root, const Array& seed);

}  // namespace detail
}  // namespace tg
