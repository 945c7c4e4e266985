// The tape: recording ops, and replaying them in reverse.
//
// Every recorded op gets a sequence number from a global counter, so sorting the nodes
// reachable from the root by descending sequence number is a valid reverse topological
// order: an op always runs after the ops that consumed its output. Nothing recurses, so a
// chain of 100,000 ops is as safe as a chain of three.
#include <algorithm>
#include <atomic>
#include <sstream>
#include <utility>

#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xstrided_view.hpp>

#include "autograd/anomaly.h"
#include "autograd/node.h"
#include "core/shape.h"

namespace tg {
namespace detail {

namespace {
thread_local bool grad_enabled = true;
std::atomic<uint64_t> next_seq{1};
}  // namespace

bool BackwardContext::needs(size_t i) const { return node_.inputs.at(i) != nullptr; }

namespace {
std::atomic<uint32_t> next_replay{1};

void accumulate(std::shared_ptr<Array>& dst, Array&& g) {
  if (!dst) {
    dst = std::make_shared<Array>(std::move(g));
  } else {
    xt::noalias(*dst) += g;  // plain += would build a temporary first
  }
}
}  // namespace

// Sums g down to input i's shape and adds it where it belongs: to the pending gradient of
// the node that produced the input (which runs later: it has a lower sequence number), or to
// a leaf's .grad(). The input's shape is read from its value, which the node keeps alive.
void BackwardContext::give(size_t i, Array g) {
  TensorImpl* in = node_.inputs.at(i).get();
  if (!in) return;
  if (anomaly_on()) check_gradient(node_, i, g, grad_);
  const auto& shape = in->value->shape();
  Array gi = g.shape() == shape ? std::move(g) : sum_to(g, Shape(shape.begin(), shape.end()));
  if (in->grad_fn) {
    std::optional<Array>& dst = pending_[in->grad_fn->slot];
    if (dst)
      xt::noalias(*dst) += gi;
    else
      dst.emplace(std::move(gi));
  } else {
    accumulate(in->grad, std::move(gi));
  }
}

Node::~Node() {
  // Destroying the last handle of a long chain would otherwise recurse once per op.
  // Move the nodes this one owns alone into a list and destroy them from a loop.
  static thread_local std::vector<std::shared_ptr<Node>>* pending = nullptr;
  std::vector<std::shared_ptr<Node>> local;
  const bool top = pending == nullptr;
  if (top) pending = &local;
  for (auto& in : inputs) {
    if (in && in.use_count() == 1 && in->grad_fn) pending->push_back(std::move(in->grad_fn));
  }
  inputs.clear();
  if (top) {
    while (!local.empty()) {
      auto n = std::move(local.back());
      local.pop_back();
      n.reset();  // may push more nodes onto `local`
    }
    pending = nullptr;
  }
}

namespace {
bool any_requires_grad(const Tensor* inputs, size_t n) {
  if (!grad_enabled) return false;
  for (size_t i = 0; i < n; ++i)
    if (inputs[i].defined() && inputs[i].impl()->requires_grad) return true;
  return false;
}

Tensor record_impl(const char* name, std::shared_ptr<Array> value, const Tensor* inputs, size_t n,
                   BackwardFn fn) {
  auto impl = new_impl();
  impl->value = std::move(value);
  if (any_requires_grad(inputs, n)) {
    auto node = std::make_shared<Node>();
    node->name = name;
    node->seq = next_seq.fetch_add(1, std::memory_order_relaxed);
    node->inputs.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const Tensor& t = inputs[i];
      const bool wants = t.defined() && t.impl()->requires_grad;
      node->inputs.push_back(wants ? t.impl() : nullptr);
    }
    node->backward = std::move(fn);
    node->output = impl;
    if (anomaly_on()) node->module = current_module_id();
    impl->grad_fn = std::move(node);
    impl->requires_grad = true;
  }
  if (anomaly_on()) check_forward(name, *impl->value, inputs, n);
  return Tensor(std::move(impl));
}
}  // namespace

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  return any_requires_grad(inputs.data(), inputs.size());
}

Tensor record(const char* name, std::shared_ptr<Array> value, const std::vector<Tensor>& inputs,
              BackwardFn fn) {
  return record_impl(name, std::move(value), inputs.data(), inputs.size(), std::move(fn));
}

Tensor record(const char* name, Array value, const std::vector<Tensor>& inputs, BackwardFn fn) {
  return record_impl(name, std::make_shared<Array>(std::move(value)), inputs.data(), inputs.size(),
                     std::move(fn));
}

Tensor record(const char* name, std::shared_ptr<Array> value, std::initializer_list<Tensor> inputs,
              BackwardFn fn) {
  return record_impl(name, std::move(value), inputs.begin(), inputs.size(), std::move(fn));
}

Tensor record(const char* name, Array value, std::initializer_list<Tensor> inputs, BackwardFn fn) {
  return record_impl(name, std::make_shared<Array>(std::move(value)), inputs.begin(),
                     inputs.size(), std::move(fn));
}

void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  if (!root.defined()) throw AutogradError("backward: the tensor is undefined");
  TensorImpl& r = *root.impl();
  if (!r.requires_grad)
    throw AutogradError(
        "backward: the tensor does not require grad and has no grad_fn (shape " +
        to_string(shape_of(*r.value)) + ")");
  Array seed;
  if (grad.defined()) {
    if (shape_of(val(grad)) != shape_of(*r.value))
      throw ShapeError("backward: gradient shape " + to_string(shape_of(val(grad))) +
                       " does not match the tensor's shape " + to_string(shape_of(*r.value)));
    seed = val(grad);
  } else {
    if (r.value->size() != 1)
      throw AutogradError(
          "backward: grad can be implicitly created only for scalar outputs, but the tensor "
          "has shape " +
          to_string(shape_of(*r.value)) + "; pass an upstream gradient of that shape");
    seed = xt::ones<float>(r.value->shape());
  }
  if (anomaly_on()) check_seed(r.grad_fn.get(), seed);
  if (!r.grad_fn) {  // a leaf: its gradient is the seed
    accumulate(r.grad, std::move(seed));
    return;
  }

  // Collect the nodes reachable from the root (iteratively) and order them newest first.
  // Each node is marked with this replay's number instead of being kept in a hash set.
  // (A 32-bit mark: a stale one would need 2^32 replays while the graph stays alive. 0 is
  // what a new node holds, so it is never a replay's mark.)
  uint32_t replay = 0;
  while (replay == 0) replay = next_replay.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::pair<uint64_t, Node*>> order;  // (seq, node): sorting reads no node
  std::vector<Node*> stack{r.grad_fn.get()};
  stack.back()->visited = replay;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.emplace_back(n->seq, n);
    for (const auto& in : n->inputs) {
      if (in && in->grad_fn && in->grad_fn->visited != replay) {
        in->grad_fn->visited = replay;
        stack.push_back(in->grad_fn.get());
      }
    }
  }
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; k < order.size(); ++k) order[k].second->slot = static_cast<uint32_t>(k);

  // dL/d(output) of each node, summed by its consumers before it runs (one slot per node).
  std::vector<std::optional<Array>> pending(order.size());
  pending[0].emplace(std::move(seed));  // the root is the newest node
  for (size_t k = 0; k < order.size(); ++k) {
    Node* n = order[k].second;
    if (!pending[k]) continue;  // no path from the root's gradient reaches it
    if (n->released)
      throw AutogradError(std::string("backward: trying to backward through the graph a second "
                                      "time (op '") +
                          n->name +
                          "'); its saved values were freed. Pass retain_graph = true to the "
                          "first backward() if you need to call it twice");
    Array g = std::move(*pending[k]);
    pending[k].reset();
    if (auto out = n->output.lock(); out && out->retains_grad) accumulate(out->grad, Array(g));

    BackwardContext ctx(g, *n, pending.data());
    n->backward(ctx);  // gives each input its gradient (BackwardContext::give)
    if (!retain_graph) {
      n->backward = nullptr;  // frees the values the closure saved
      n->released = true;
    }
  }
}

// ---- reducing broadcast gradients -------------------------------------------------------

namespace {
bool same_shape(const Array& g, const Shape& target) {
  const auto& gs = g.shape();
  if (gs.size() != target.size()) return false;
  for (size_t i = 0; i < gs.size(); ++i)
    if (static_cast<int64_t>(gs[i]) != target[i]) return false;
  return true;
}
}  // namespace

Array sum_to(const Array& g, const Shape& target) {
  if (same_shape(g, target)) return g;
  const Shape gs = shape_of(g);
  const size_t lead = gs.size() - target.size();
  std::vector<size_t> axes;
  for (size_t i = 0; i < gs.size(); ++i) {
    if (i < lead || (target[i - lead] == 1 && gs[i] != 1)) axes.push_back(i);
  }
  Array r = xt::sum(g, axes, xt::evaluation_strategy::immediate);
  r.reshape(to_xshape(target));
  return r;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

}  // namespace detail

bool is_grad_enabled() { return detail::grad_enabled; }
void set_grad_enabled(bool enabled) { detail::grad_enabled = enabled; }

}  // namespace tg
