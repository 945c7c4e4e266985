// The tape: recording ops, and replaying them in reverse.
//
// Every recorded op gets a sequence number from a global counter, so sorting the nodes
// reachable from the root by descending sequence number is a valid reverse topological
// order: an op always runs after the ops that consumed its output. Nothing recurses, neither
// the replay nor the teardown of a graph, so a chain of 200,000 ops is as safe as a chain of
// three.
#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>

#include "autograd/anomaly.h"
#include "autograd/node.h"
#include "backend/vec.h"
#include "core/shape.h"

namespace tg {
namespace detail {

namespace {
thread_local bool grad_enabled = true;
std::atomic<uint64_t> next_seq{1};
std::atomic<uint32_t> next_replay{1};
// Backward passes in two threads may meet in one leaf (a shared parameter): its gradient is
// accumulated under this lock, as PyTorch does.
std::mutex leaf_mutex;

/// dst += g, in place (the vector kernels; g has dst's shape, else xtensor broadcasts it).
template <class D>
void add_into(D& dst, const Array& g) {
  if (dst.shape() == g.shape())
    vec::kernels().binary(vec::Binary::Add, dst.data(), dst.size(), g.data(), g.size(),
                          dst.data(), dst.size());
  else
    xt::noalias(dst) += g;  // plain += would build a temporary first
}

void accumulate(std::shared_ptr<Storage>& dst, Array&& g) {
  if (!dst) {
    dst = make_storage(std::move(g));
  } else {
    add_into(dst->data, g);
    bump_version(*dst);
  }
}

void accumulate_leaf(TensorImpl& leaf, Array&& g) {
  std::lock_guard<std::mutex> lock(leaf_mutex);
  accumulate(leaf.grad, std::move(g));
}

Edge edge_to(const Tensor& t) {
  if (!t.defined()) return {};
  refresh_view(t.impl());
  if (!t.impl()->requires_grad) return {};
  if (t.impl()->grad_fn) return {t.impl()->grad_fn, nullptr};
  return {nullptr, t.impl()};
}

}  // namespace

bool BackwardContext::needs(size_t i) const { return node_.next.at(i).defined(); }

void BackwardContext::check_version(const Saved& s) const {
  const uint32_t now = version_of(*s.storage_);
  if (now != s.version_)
    throw AutogradError(
        std::string("backward of op '") + node_.name +
        "': one of the variables needed for gradient computation has been modified by an "
        "inplace operation: a tensor" +
        " of shape " + to_string(shape_of(s.window_ ? *s.window_ : s.storage_->data)) +
        " is at version " + std::to_string(now) + "; expected version " +
        std::to_string(s.version_) + " (when '" + node_.name +
        "' saved it). Compute from a clone() instead, or write in place after backward()");
}

const View& BackwardContext::read(const Saved& s) const {
  check_version(s);
  return s.window_ ? *s.window_ : s.storage_->data;
}

const float* BackwardContext::read_data(const Saved& s) const {
  check_version(s);
  return s.storage_->data.data() + s.offset_;
}

// Sums g down to input i's shape and adds it where it belongs: to the pending gradient of
// the node that produced the input (which runs later: it has a lower sequence number), or to
// a leaf's .grad(). g must have the input's shape or one the input broadcasts to.
void BackwardContext::give(size_t i, Array g) {
  const Edge& e = node_.next.at(i);
  if (!e.defined()) return;
  if (anomaly_on()) check_gradient(node_, i, g, grad_);
  if (i == 0 && self_grad_) {  // an in-place op's closure on a view's slice
    const Shape target(self_shape_->begin(), self_shape_->end());
    if (g.shape() != *self_shape_) g = sum_to(g, target);
    if (*self_grad_) add_into(**self_grad_, g);
    else self_grad_->emplace(std::move(g));
    return;
  }
  const auto& want = e.fn ? e.fn->shape : e.leaf->shape();
  if (g.shape() != want) {
    const Shape target(want.begin(), want.end());
    if (!broadcasts_to(target, shape_of(g)))
      throw AutogradError(std::string("backward of op '") + node_.name + "' gave input " +
                          std::to_string(i) + " a gradient of shape " + to_string(shape_of(g)) +
                          ", which the input's shape " + to_string(target) +
                          " does not broadcast to");
    g = sum_to(g, target);
  }
  if (e.fn) {
    std::optional<Array>& dst = pending_[e.fn->slot];
    if (dst)
      add_into(*dst, g);
    else
      dst.emplace(std::move(g));
  } else {
    accumulate_leaf(*e.leaf, std::move(g));
  }
}

Node::~Node() {
  // What a node owns may own further nodes: its edges, and whatever its closure captured (a
  // custom op's closure may hold a tensor, with a history of its own). Destroying them here
  // would recurse once per node. Instead the outermost ~Node on this thread takes them over
  // and destroys them one by one from a loop, so any graph is freed with a constant stack.
  struct Parts {
    std::vector<Edge> next;
    BackwardFn backward;
  };
  static thread_local std::vector<Parts>* pending = nullptr;
  Parts parts{std::move(next), std::move(backward)};
  next.clear();
  backward = nullptr;
  if (pending) {
    pending->push_back(std::move(parts));
    return;
  }
  std::vector<Parts> local;
  pending = &local;
  local.push_back(std::move(parts));
  while (!local.empty()) {
    Parts p = std::move(local.back());
    local.pop_back();
  }  // p dies here; the nodes it held push their parts onto `local`
  pending = nullptr;
}

bool any_requires_grad(const Tensor* inputs, size_t n) {
  if (!grad_enabled) return false;
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    if (!inputs[i].defined()) continue;
    refresh_view(inputs[i].impl());
    any = any || inputs[i].impl()->requires_grad;
  }
  return any;
}

std::shared_ptr<Node> make_node(const char* name, const Tensor* inputs, size_t n,
                                const Array::shape_type& shape,
                                BackwardFn fn, const std::shared_ptr<TensorImpl>& output) {
  auto node = std::make_shared<Node>();
  node->name = name;
  node->seq = next_seq.fetch_add(1, std::memory_order_relaxed);
  node->next.reserve(n);
  for (size_t i = 0; i < n; ++i) node->next.push_back(edge_to(inputs[i]));
  node->shape = shape;
  node->backward = std::move(fn);
  node->output = output;
  if (anomaly_on()) node->module = current_module_id();
  return node;
}

namespace {

Tensor record_impl(const char* name, std::shared_ptr<Storage> value, const Tensor* inputs, size_t n,
                   BackwardFn fn) {
  auto impl = impl_over(std::move(value));
  if (any_requires_grad(inputs, n)) {
    impl->grad_fn = make_node(name, inputs, n, impl->shape(), std::move(fn), impl);
    impl->requires_grad = true;
  }
  Tensor out(std::move(impl));
  if (anomaly_on()) check_forward(name, out, inputs, n);
  return out;
}
}  // namespace

Tensor record(const char* name, std::shared_ptr<Storage> value, const std::vector<Tensor>& inputs,
              BackwardFn fn) {
  return record_impl(name, std::move(value), inputs.data(), inputs.size(), std::move(fn));
}

Tensor record(const char* name, Array value, const std::vector<Tensor>& inputs, BackwardFn fn) {
  return record_impl(name, make_storage(std::move(value)), inputs.data(), inputs.size(),
                     std::move(fn));
}

Tensor record(const char* name, std::shared_ptr<Storage> value, std::initializer_list<Tensor> inputs,
              BackwardFn fn) {
  return record_impl(name, std::move(value), inputs.begin(), inputs.size(), std::move(fn));
}

Tensor record(const char* name, Array value, std::initializer_list<Tensor> inputs, BackwardFn fn) {
  return record_impl(name, make_storage(std::move(value)), inputs.begin(), inputs.size(),
                     std::move(fn));
}

Tensor record_view(const char* name, std::shared_ptr<TensorImpl> view, const Tensor& input,
                   BackwardFn fn) {
  if (any_requires_grad(&input, 1)) {
    view->grad_fn = make_node(name, &input, 1, view->shape(), std::move(fn), view);
    view->requires_grad = true;
  }
  view->vi->base_history = view->vi->base->history;
  view->vi->tracks_base = grad_enabled;
  Tensor out(std::move(view));
  if (anomaly_on()) check_forward(name, out, &input, 1);
  return out;
}

void check_inplace(const Tensor& self, const char* op) {
  if (!self.defined()) throw ValueError(std::string(op) + ": the tensor is undefined");
  const TensorImpl& s = *self.impl();
  if (grad_enabled && s.requires_grad && !s.grad_fn)
    throw AutogradError(std::string(op) + ": a leaf tensor that requires grad (shape " +
                        to_string(self.shape()) +
                        ") is being used in an in-place operation; write it under "
                        "tg::NoGradGuard (PyTorch's torch.no_grad())");
  const TensorImpl* base = s.base() ? s.base()->get() : nullptr;
  if (grad_enabled && base && base->requires_grad && !base->grad_fn)
    throw AutogradError(std::string(op) + ": a view (shape " + to_string(self.shape()) +
                        ") of a leaf tensor that requires grad (shape " +
                        to_string(Shape(base->shape().begin(), base->shape().end())) +
                        ") is being used in an in-place operation; write it under "
                        "tg::NoGradGuard, or write a clone()");
  if (grad_enabled && base && !s.vi->tracks_base && base->requires_grad)
    throw AutogradError(std::string(op) + ": a view (shape " + to_string(self.shape()) +
                        ") was made in no-grad mode and is being written in place with grad "
                        "mode on, so its base's history cannot record the write; make the view "
                        "with grad mode on, or write under tg::NoGradGuard");
}

void record_inplace(const char* name, const Tensor& self, const std::vector<Tensor>& inputs,
                    BackwardFn fn) {
  if (anomaly_on()) check_forward(name, self, inputs.data(), inputs.size());
  if (!any_requires_grad(inputs.data(), inputs.size())) return;
  TensorImpl& s = *self.impl();
  if (s.base()) return rebase_through_view(name, self, inputs, std::move(fn));
  // The edges point at self's old history (inputs[0] is self, before the rebase).
  auto node = make_node(name, inputs.data(), inputs.size(), s.shape(),
                        std::move(fn), self.impl());
  if (s.grad_fn) s.grad_fn->output.reset();  // retain_grad now means the new value's gradient
  s.grad_fn = std::move(node);
  s.requires_grad = true;
  ++s.history;  // its views' histories must now go through the write
}

namespace {
// A custom op's backward may call backward() itself (reentrant backward), to any depth. Each
// level costs a few kB of stack; past kMaxDepth levels on one thread the replay continues on a
// fresh thread (and stack), as PyTorch's engine does, and this thread waits for it.
constexpr int kMaxDepth = 256;
thread_local int backward_depth = 0;

void replay(const Tensor& root, const Tensor& grad, bool retain_graph) {
  refresh_view(root.impl());  // a view whose base was written since: its history goes through it
  TensorImpl& r = *root.impl();
  const Shape shape = root.shape();
  if (!r.requires_grad)
    throw AutogradError("backward: the tensor does not require grad and has no grad_fn (shape " +
                        to_string(shape) + ")");
  Array seed;
  if (grad.defined()) {
    if (grad.shape() != shape)
      throw ShapeError("backward: gradient shape " + to_string(grad.shape()) +
                       " does not match the tensor's shape " + to_string(shape));
    seed = dense_copy(*grad.impl());
  } else {
    if (r.numel() != 1)
      throw AutogradError(
          "backward: grad can be implicitly created only for scalar outputs, but the tensor "
          "has shape " +
          to_string(shape) + "; pass an upstream gradient of that shape");
    seed = xt::ones<float>(r.shape());
  }
  if (anomaly_on()) check_seed(r.grad_fn.get(), seed);
  if (!r.grad_fn) {  // a leaf: its gradient is the seed
    accumulate_leaf(r, std::move(seed));
    return;
  }

  // Collect the nodes reachable from the root (iteratively) and order them newest first.
  // Each node is marked with this replay's number instead of being kept in a hash set.
  // (A 32-bit mark: a stale one would need 2^32 replays while the graph stays alive. 0 is
  // what a new node holds, so it is never a replay's mark.)
  uint32_t mark = 0;
  while (mark == 0) mark = next_replay.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::pair<uint64_t, Node*>> order;  // (seq, node): sorting reads no node
  std::vector<Node*> stack{r.grad_fn.get()};
  stack.back()->visited = mark;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.emplace_back(n->seq, n);
    for (const Edge& e : n->next) {
      if (e.fn && e.fn->visited != mark) {
        e.fn->visited = mark;
        stack.push_back(e.fn.get());
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
}  // namespace

void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  if (!root.defined()) throw AutogradError("backward: the tensor is undefined");
  if (backward_depth >= kMaxDepth) {
    std::exception_ptr error;
    const bool mode = grad_enabled;
    std::thread fresh([&] {
      grad_enabled = mode;
      try {
        run_backward(root, grad, retain_graph);
      } catch (...) {
        error = std::current_exception();
      }
    });
    fresh.join();
    if (error) std::rethrow_exception(error);
    return;
  }
  ++backward_depth;
  struct Leave {
    ~Leave() { --backward_depth; }
  } leave;
  replay(root, grad, retain_graph);
}

// ---- reducing broadcast gradients -------------------------------------------------------

Array sum_to(const Array& g, const Shape& target) {
  if (same_shape(g, target)) return g;
  if (g.size() == 0) return xt::zeros<float>(to_xshape(target));  // xtensor's sum crashes here
  const Shape gs = shape_of(g);
  const size_t lead = gs.size() - target.size();
  // The common case, a bias's gradient: target (after its leading 1s) is g's trailing dims,
  // so g is rows of target, summed in order with the vector kernels.
  size_t ones = 0;
  while (ones < target.size() && target[ones] == 1) ++ones;
  const size_t N = static_cast<size_t>(numel_of(target));
  if (N >= 16 && std::equal(target.begin() + static_cast<long>(ones), target.end(),
                            gs.end() - static_cast<long>(target.size() - ones))) {
    Array r = Array::from_shape(to_xshape(target));
    std::copy(g.data(), g.data() + N, r.data());
    const vec::Kernels& k = vec::kernels();
    for (size_t row = 1; row < g.size() / N; ++row)
      k.binary(vec::Binary::Add, r.data(), N, g.data() + row * N, N, r.data(), N);
    return r;
  }
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
