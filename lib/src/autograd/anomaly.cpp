// Anomaly detection: finding the first op whose forward or backward made a NaN or an Inf,
// and module scopes, which tell the report which module's forward recorded that op.
//
// Off, it costs one relaxed atomic load per recorded op and per gradient given. On, every op
// output and every gradient is scanned; the scan that finds a NaN or Inf throws AnomalyError.
// Module paths are interned (one id per distinct path), so a tape node carries
// only a 4-byte id.
#include <cmath>
#include <mutex>
#include <unordered_map>

#include "autograd/anomaly.h"
#include "core/shape.h"
#include "tapegrad/autograd.h"

namespace tg {
namespace detail {

std::atomic<bool> anomaly_flag{false};

namespace {

thread_local std::vector<uint32_t> module_stack;

struct ModuleNames {
  std::mutex mutex;
  std::vector<std::string> names{""};  // id 0: no module
  std::unordered_map<std::string, uint32_t> ids;
};
ModuleNames& module_names() {
  static ModuleNames* names = new ModuleNames;  // never destroyed: used until exit
  return *names;
}

uint32_t intern_module(const std::string& where) {
  ModuleNames& m = module_names();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto [it, fresh] = m.ids.emplace(where, static_cast<uint32_t>(m.names.size()));
  if (fresh) m.names.push_back(where);
  return it->second;
}

std::string module_name(uint32_t id) {
  ModuleNames& m = module_names();
  std::lock_guard<std::mutex> lock(m.mutex);
  return id < m.names.size() ? m.names[id] : std::string();
}

struct Census {
  size_t nan = 0, pos_inf = 0, neg_inf = 0, size = 0;
  bool finite() const { return nan + pos_inf + neg_inf == 0; }
  bool has_inf() const { return pos_inf + neg_inf != 0; }
};

template <class E>
Census census(const E& a) {
  Census c;
  c.size = a.size();
  for (float v : a) {
    if (std::isfinite(v)) continue;
    if (std::isnan(v)) ++c.nan;
    else if (v > 0) ++c.pos_inf;
    else ++c.neg_inf;
  }
  return c;
}

bool all_finite(const Array& a) {
  for (float v : a)
    if (!std::isfinite(v)) return false;
  return true;
}

/// "NaN (2 of 12 values; 1 inf)"
std::string describe(const Census& c) {
  std::string what = c.nan ? "NaN" : c.pos_inf ? "inf" : "-inf";
  std::string out = what + " (" + std::to_string(c.nan + c.pos_inf + c.neg_inf) + " of " +
                    std::to_string(c.size) + " values:";
  if (c.nan) out += " " + std::to_string(c.nan) + " NaN";
  if (c.pos_inf) out += " " + std::to_string(c.pos_inf) + " inf";
  if (c.neg_inf) out += " " + std::to_string(c.neg_inf) + " -inf";
  return out + ")";
}

std::string in_module(uint32_t id) {
  const std::string m = module_name(id);
  return m.empty() ? std::string(" (no module scope)") : " in module '" + m + "'";
}

}  // namespace

uint32_t current_module_id() { return module_stack.empty() ? 0 : module_stack.back(); }

void check_forward(const char* name, const Tensor& output, const Tensor* inputs, size_t n) {
  const Array out = dense_copy(*output.impl());
  const Census c = census(out);
  if (c.finite()) return;
  bool inputs_finite = true;
  std::string ins;
  for (size_t i = 0; i < n; ++i) {
    ins += i ? ", " : "";
    if (!inputs[i].defined()) {
      ins += "(none)";
      continue;
    }
    const Census ic = census(dense_copy(*inputs[i].impl()));
    inputs_finite = inputs_finite && ic.finite();
    ins += to_string(inputs[i].shape());
    if (!ic.finite()) ins += " holding " + describe(ic);
    if (!inputs[i].impl()->grad_fn) ins += " (leaf)";
  }
  // Inf from inputs that already held Inf is propagation, not the first anomaly; masked_fill
  // writes ±inf on purpose (attention masks).
  if (c.nan == 0 && (!inputs_finite || std::string(name) == "masked_fill")) return;
  throw AnomalyError("anomaly detected: the forward of op '" + std::string(name) + "'" +
                     in_module(current_module_id()) + " produced " + describe(c) +
                     "; output shape " + to_string(shape_of(out)) + ", inputs " +
                     (n ? ins : std::string("none")) +
                     (inputs_finite ? "; every input was finite" : ""));
}

void check_gradient(const Node& node, size_t i, const Array& g, const Array& grad_out) {
  if (all_finite(g)) return;
  const Census c = census(g);
  std::string received;
  if (grad_out.size() == 0 && g.size() != 0) {
    received = "taken by the closure";
  } else {
    const Census gc = census(grad_out);
    received = to_string(shape_of(grad_out)) + (gc.finite() ? ", finite" : ", holding " + describe(gc));
  }
  const Edge& in = node.next[i];
  const auto& want = in.fn ? in.fn->shape : in.leaf->shape();
  const Shape in_shape(want.begin(), want.end());
  throw AnomalyError("anomaly detected: the backward of op '" + std::string(node.name) + "'" +
                     in_module(node.module) + " produced " + describe(c) +
                     " in the gradient of its input " + std::to_string(i) + " (shape " +
                     to_string(in_shape) + (in.fn ? "" : ", a leaf") +
                     "; gradient shape " + to_string(shape_of(g)) +
                     "); the output gradient it received: " + received);
}

void check_seed(const Node* root, const Array& seed) {
  if (all_finite(seed)) return;
  throw AnomalyError("anomaly detected: backward() was given a gradient holding " +
                     describe(census(seed)) + ", shape " + to_string(shape_of(seed)) +
                     (root ? std::string(", for the output of op '") + root->name + "'" : ""));
}

}  // namespace detail

void detect_anomaly(bool on) { detail::anomaly_flag.store(on, std::memory_order_relaxed); }
bool is_anomaly_enabled() { return detail::anomaly_on(); }

ModuleScope::ModuleScope(const std::string& path) : active_(detail::anomaly_on() && !path.empty()) {
  if (active_) detail::module_stack.push_back(detail::intern_module(path));
}

ModuleScope::~ModuleScope() {
  if (active_ && !detail::module_stack.empty()) detail::module_stack.pop_back();
}

std::string current_module() {
  return detail::anomaly_on() ? detail::module_name(detail::current_module_id()) : std::string();
}

}  // namespace tg
