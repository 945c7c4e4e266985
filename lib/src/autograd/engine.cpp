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
#include <unordered_map>
#include <utility>

#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>

#include "autograd/anomaly.h"
#include "autograd/engine.h"
#include "autograd/node.h"
#include "backend/parallel.h"
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

/// Whether g's elements recur whole every g.size() elements of dst: g's shape, without its
/// leading 1s, is dst's trailing dims (the same shape, a bias row, a scalar).
template <class D>
bool repeats_in(const Array& g, const D& dst) {
  size_t lead = 0;
  while (lead < g.dimension() && g.shape()[lead] == 1) ++lead;
  const size_t k = g.dimension() - lead;
  return k <= dst.dimension() && dst.size() > 0 && dst.size() % std::max<size_t>(g.size(), 1) == 0 &&
         std::equal(g.shape().begin() + static_cast<long>(lead), g.shape().end(),
                    dst.shape().end() - static_cast<long>(k));
}

/// dst += g, in place: the vector kernels (split across tapegrad's threads when large) where
/// g has dst's shape or repeats whole in it, else xtensor broadcasts it.
template <class D>
void add_into(D& dst, const Array& g) {
  if (repeats_in(g, dst))
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

// LeafGrads alive on this thread: each holds leaf_mutex (see BackwardContext::leaf_grad).
thread_local int leaf_grads_held = 0;

void accumulate_leaf(TensorImpl& leaf, Array&& g) {
  if (leaf_grads_held)  // the lock is not recursive: this would deadlock
    throw Error("internal error: a backward closure gave a leaf a gradient while it held a "
                "LeafGrad (release it first)");
  std::lock_guard<std::mutex> lock(leaf_mutex);
  accumulate(leaf.grad, std::move(g));
}

/// The inputs of one replay of autograd::grad or backward(inputs): only they receive
/// gradients, and only the nodes on a path from a root to one of them run. The replay that
/// owns it installs it for its thread (closures run on the replaying thread); a reentrant
/// backward inside a closure installs its own, or none, and restores this one after.
struct Targets {
  struct Target {
    std::vector<std::shared_ptr<TensorImpl>> impls;  // the inputs it stands for (kInputsGrad)
    std::optional<Array> grad;                       // what reached it (kReturn)
  };
  Deliver deliver = Deliver::kReturn;
  std::vector<Target> list;
  /// A leaf input's impl, or a non-leaf input's producing node, to its place in `list`.
  std::unordered_map<const void*, size_t> index;
  std::vector<char> needed;  // by slot: the node's gradient leads to an input

  /// Does the gradient along `e` lead to an input?
  bool wants(const Edge& e) const {
    return e.fn ? needed[e.fn->slot] != 0 : index.count(e.leaf.get()) != 0;
  }
  /// The gradient of target k, arriving (possibly in parts).
  void receive(size_t k, Array&& g);
};
thread_local Targets* targets = nullptr;

void Targets::receive(size_t k, Array&& g) {
  Target& t = list[k];
  if (deliver == Deliver::kInputsGrad) {
    for (const auto& impl : t.impls) accumulate_leaf(*impl, Array(g));
  } else if (t.grad) {
    xt::noalias(*t.grad) += g;
  } else {
    t.grad.emplace(std::move(g));
  }
}

/// A leaf's gradient: into its .grad(), or, during autograd::grad or backward(inputs), to
/// the input it is (dropped if it is none).
void to_leaf(TensorImpl& leaf, Array&& g) {
  if (!targets) return accumulate_leaf(leaf, std::move(g));
  const auto it = targets->index.find(&leaf);
  if (it != targets->index.end()) targets->receive(it->second, std::move(g));
}

Edge edge_to(const Tensor& t) {
  if (!t.defined()) return {};
  refresh_view(t.impl());
  if (!t.impl()->requires_grad) return {};
  if (t.impl()->grad_fn) return {t.impl()->grad_fn, nullptr};
  return {nullptr, t.impl()};
}

}  // namespace

bool BackwardContext::needs(size_t i) const {
  const Edge& e = node_.next.at(i);
  return e.defined() && (!targets || targets->wants(e));
}

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

LeafGrad BackwardContext::leaf_grad(size_t i, std::initializer_list<const Storage*> reads) const {
  LeafGrad out;
  if (targets || anomaly_on() || (i == 0 && self_grad_)) return out;
  const Edge& e = node_.next.at(i);
  if (e.fn || !e.leaf) return out;  // no gradient wanted, or the input came out of an op
  TensorImpl& leaf = *e.leaf;
  std::unique_lock<std::mutex> lock(leaf_mutex);
  const std::shared_ptr<Storage>& g = leaf.grad;
  if (!g || g->dtype != DType::Float32 || g->data.shape() != leaf.shape()) return out;
  if (g == leaf.storage) return out;  // set_grad(itself): keep the values the op may read
  for (const Storage* r : reads)
    if (r == g.get()) return out;  // the GEMM would write what it reads
  out.lock_ = std::move(lock);
  out.grad_ = g;
  ++leaf_grads_held;
  return out;
}

LeafGrad::~LeafGrad() {
  if (!grad_) return;
  bump_version(*grad_);  // the write, recorded before the lock goes
  --leaf_grads_held;
}

// Sums g down to input i's shape and adds it where it belongs: to the pending gradient of
// the node that produced the input (which runs later: it has a lower sequence number), or to
// a leaf's .grad(). g must have the input's shape or one the input broadcasts to.
void BackwardContext::give(size_t i, Array g) {
  if (!needs(i)) return;
  const Edge& e = node_.next.at(i);
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
    to_leaf(*e.leaf, std::move(g));
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

/// The gradient backward starts from at one root: `grad` (checked), or ones for a root of one
/// element. `what` names the root in errors ("backward", "autograd::grad: output 1").
Array seed_of(const Tensor& root, const Tensor& grad, const std::string& what) {
  if (!root.defined()) throw AutogradError(what + ": the tensor is undefined");
  refresh_view(root.impl());  // a view whose base was written since: its history goes through it
  const TensorImpl& r = *root.impl();
  const Shape shape = root.shape();
  if (!r.requires_grad)
    throw AutogradError(what + ": the tensor does not require grad and has no grad_fn (shape " +
                        to_string(shape) + ")");
  if (grad.defined()) {
    if (grad.shape() != shape)
      throw ShapeError(what + ": gradient shape " + to_string(grad.shape()) +
                       " does not match the tensor's shape " + to_string(shape));
    return dense_copy(*grad.impl());
  }
  if (r.numel() != 1)
    throw AutogradError(
        what + ": grad can be implicitly created only for scalar outputs, but the tensor has "
        "shape " + to_string(shape) + "; pass an upstream gradient of that shape");
  return xt::ones<float>(r.shape());
}

/// Replays the tape from every root at once. With `plan`, only what leads to its inputs runs
/// and only they receive gradients (see Targets).
void replay(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
            Targets* plan, const char* what) {
  struct Install {  // this replay's inputs for this thread, the outer replay's after
    Targets* prev;
    explicit Install(Targets* t) : prev(targets) { targets = t; }
    ~Install() { targets = prev; }
  } install(plan);

  std::vector<std::pair<Node*, Array>> seeds;  // the roots that have a history
  for (size_t k = 0; k < roots.size(); ++k) {
    const std::string where =
        roots.size() == 1 ? std::string(what) : std::string(what) + ": output " + std::to_string(k);
    Array seed = seed_of(roots[k], k < grads.size() ? grads[k] : Tensor(), where);
    TensorImpl& r = *roots[k].impl();
    if (anomaly_on()) check_seed(r.grad_fn.get(), seed);
    if (r.grad_fn)
      seeds.emplace_back(r.grad_fn.get(), std::move(seed));
    else
      to_leaf(r, std::move(seed));  // a leaf: its gradient is the seed
  }
  if (seeds.empty()) return;

  // Collect the nodes reachable from the roots (iteratively) and order them newest first.
  // Each node is marked with this replay's number instead of being kept in a hash set.
  // (A 32-bit mark: a stale one would need 2^32 replays while the graph stays alive. 0 is
  // what a new node holds, so it is never a replay's mark.)
  uint32_t mark = 0;
  while (mark == 0) mark = next_replay.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::pair<uint64_t, Node*>> order;  // (seq, node): sorting reads no node
  std::vector<Node*> stack;
  for (const auto& s : seeds) {
    if (s.first->visited == mark) continue;
    s.first->visited = mark;
    stack.push_back(s.first);
  }
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

  // With inputs: which nodes lead to one (oldest first, as an edge always points at an older
  // node), and which of those must run their backward (an edge of theirs leads to one).
  std::vector<char> runs;
  if (plan) {
    plan->needed.assign(order.size(), 0);
    runs.assign(order.size(), 0);
    for (size_t k = order.size(); k-- > 0;) {
      const Node* n = order[k].second;
      for (const Edge& e : n->next)
        if (e.defined() && plan->wants(e)) runs[k] = 1;
      plan->needed[k] = runs[k] || plan->index.count(n) != 0;
    }
  }

  // dL/d(output) of each node, summed by its consumers before it runs (one slot per node).
  std::vector<std::optional<Array>> pending(order.size());
  for (auto& [node, seed] : seeds) {
    std::optional<Array>& dst = pending[node->slot];
    if (dst) xt::noalias(*dst) += seed;
    else dst.emplace(std::move(seed));
  }
  for (size_t k = 0; k < order.size(); ++k) {
    Node* n = order[k].second;
    if (!pending[k]) continue;  // no path from the roots' gradients reaches it
    if (plan && !plan->needed[k]) {
      pending[k].reset();  // a root's own history that leads to no input
      continue;
    }
    Array g = std::move(*pending[k]);
    pending[k].reset();
    bool is_input = false;
    if (plan) {
      const auto it = plan->index.find(n);
      is_input = it != plan->index.end();
      if (is_input) plan->receive(it->second, runs[k] ? Array(g) : std::move(g));
      if (!runs[k]) continue;
    }
    if (n->released)
      throw AutogradError(std::string(what) + ": trying to backward through the graph a second "
                          "time (op '" + n->name +
                          "'); its saved values were freed. Pass retain_graph = true to the "
                          "first backward() if you need to call it twice");
    // retain_grad: not for autograd::grad, which touches no .grad().
    const bool retained = !plan || (plan->deliver == Deliver::kInputsGrad && !is_input);
    if (auto out = n->output.lock(); retained && out && out->retains_grad)
      accumulate(out->grad, Array(g));

    BackwardContext ctx(g, *n, pending.data());
    n->backward(ctx);  // gives each input its gradient (BackwardContext::give)
    if (!retain_graph) {
      n->backward = nullptr;  // frees the values the closure saved
      n->released = true;
    }
  }
}

/// Runs `fn` (a replay) here, or, past kMaxDepth nested backward calls on this thread, on a
/// fresh thread (and stack) while this one waits.
template <class F>
void with_stack(const F& fn) {
  if (backward_depth >= kMaxDepth) {
    std::exception_ptr error;
    const bool mode = grad_enabled;
    std::thread fresh([&] {
      grad_enabled = mode;
      try {
        with_stack(fn);
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
  fn();
}
}  // namespace

void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  if (!root.defined()) throw AutogradError("backward: the tensor is undefined");
  with_stack([&] { replay({root}, {grad}, retain_graph, nullptr, "backward"); });
}

std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                                 bool retain_graph, const std::vector<Tensor>& inputs,
                                 Deliver deliver, const char* what) {
  if (deliver == Deliver::kAllLeaves) {
    with_stack([&] { replay(roots, grads, retain_graph, nullptr, what); });
    return {};
  }
  // One target per distinct input: a leaf by its impl, a non-leaf by the node producing it.
  Targets plan;
  plan.deliver = deliver;
  std::vector<size_t> where(inputs.size());  // input p -> its target
  for (size_t p = 0; p < inputs.size(); ++p) {
    const std::shared_ptr<TensorImpl>& impl = inputs[p].impl();
    refresh_view(impl);
    const void* key = impl->grad_fn ? static_cast<const void*>(impl->grad_fn.get()) : impl.get();
    const auto [it, fresh] = plan.index.emplace(key, plan.list.size());
    if (fresh) plan.list.emplace_back();
    auto& impls = plan.list[it->second].impls;
    if (std::find(impls.begin(), impls.end(), impl) == impls.end()) impls.push_back(impl);
    where[p] = it->second;
  }
  with_stack([&] { replay(roots, grads, retain_graph, &plan, what); });
  if (deliver != Deliver::kReturn) return {};
  std::vector<Tensor> out(inputs.size());
  std::vector<size_t> uses(plan.list.size(), 0);  // an input named twice gets a copy
  for (size_t t : where) ++uses[t];
  for (size_t p = 0; p < inputs.size(); ++p) {
    std::optional<Array>& g = plan.list[where[p]].grad;
    if (!g) continue;
    out[p] = make_leaf(--uses[where[p]] == 0 ? std::move(*g) : Array(*g));
  }
  return out;
}

// ---- reducing broadcast gradients -------------------------------------------------------

Array sum_to(const Array& g, const Shape& target) {
  if (same_shape(g, target)) return g;
  if (g.size() == 0) return xt::zeros<float>(to_xshape(target));  // xtensor's sum crashes here
  const Shape gs = shape_of(g);
  const size_t lead = gs.size() - target.size();
  // The common case, a bias's gradient: target (after its leading 1s) is g's trailing dims,
  // so g is rows of target, summed in order with the vector kernels. The columns split across
  // tapegrad's threads: each still sums its rows in order (the same bits at any count).
  size_t ones = 0;
  while (ones < target.size() && target[ones] == 1) ++ones;
  const size_t N = static_cast<size_t>(numel_of(target));
  if (N >= 16 && std::equal(target.begin() + static_cast<long>(ones), target.end(),
                            gs.end() - static_cast<long>(target.size() - ones))) {
    Array r = Array::from_shape(to_xshape(target));
    const vec::Kernels& k = vec::kernels();
    const float* pg = g.data();
    float* pr = r.data();
    const size_t rows = g.size() / N;
    for_range(static_cast<int64_t>(N), static_cast<int64_t>(kGrain / rows + 1),
              [&k, pg, pr, rows, N](int64_t c0, int64_t c1) {
                const auto b = static_cast<size_t>(c0), n = static_cast<size_t>(c1 - c0);
                std::copy(pg + b, pg + b + n, pr + b);
                for (size_t row = 1; row < rows; ++row)
                  k.binary(vec::Binary::Add, pr + b, n, pg + row * N + b, n, pr + b, n);
              });
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
