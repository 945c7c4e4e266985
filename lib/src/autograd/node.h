#pragma once
// Library-internal, the autograd layer: the tape's node, what a backward closure sees, and
// record(), through which every op puts itself on the tape. Not installed.
//
// A node keeps edges to the nodes that produced its inputs (or to the leaves whose gradients
// it feeds), never the inputs' values: what its backward reads, its closure saves, through
// Saved, which remembers the version of what it saved. Backward frees every closure unless
// the graph is retained, and with it every saved value.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/storage.h"
#include "tapegrad/autograd.h"

namespace tg {
namespace detail {

/// A value an op's backward reads: the storage (kept alive) and its version when saved. Read
/// it with BackwardContext::read, which refuses it if an in-place write changed it since.
class Saved {
 public:
  Saved() = default;  // nothing (an optional input that was not given)
  /// t's values as they are now, through its geometry (t is contiguous: ops call dense()).
  explicit Saved(const Tensor& t)
      : storage_(t.impl()->storage), offset_(t.impl()->offset()), version_(version_of(*storage_)) {
    const View& v = val(t);
    if (&v != &storage_->data) window_ = std::make_shared<const View>(v);  // a view's
  }
  /// A storage as it is now (an op's own output, saved for its backward).
  explicit Saved(std::shared_ptr<Storage> s) : storage_(std::move(s)), version_(version_of(*storage_)) {}
  /// t's values in any geometry, for a kernel that walks its strides itself (a GEMM reading a
  /// transposed view): read them with BackwardContext::read_data.
  static Saved strided(const Tensor& t) {
    Saved s;
    s.storage_ = t.impl()->storage;
    s.offset_ = t.impl()->offset();
    s.version_ = version_of(*s.storage_);
    return s;
  }
  bool defined() const { return storage_ != nullptr; }
  /// What was saved (for a GEMM's device cache, which names an operand by its storage).
  Storage* storage() const { return storage_.get(); }

 private:
  friend class BackwardContext;
  std::shared_ptr<Storage> storage_;
  std::shared_ptr<const View> window_;  // a contiguous view's; null: the whole storage
  int64_t offset_ = 0;
  uint32_t version_ = 0;
};

/// A leaf input's .grad() buffer, held for an op that adds its gradient there itself (a GEMM
/// with beta = 1) instead of giving it: see BackwardContext::leaf_grad. While it lives it
/// holds the lock under which leaves accumulate (two threads' backward passes may meet in a
/// shared parameter), so the op must not give() anything until it is gone; its destructor
/// records the write (bumps the gradient's version).
class LeafGrad {
 public:
  LeafGrad() = default;
  LeafGrad(LeafGrad&&) = default;
  LeafGrad& operator=(LeafGrad&&) = delete;
  ~LeafGrad();
  /// False: accumulate the old way (compute the gradient, then give() it).
  explicit operator bool() const { return grad_ != nullptr; }
  /// The gradient's elements: dense, row-major, in the leaf's shape.
  float* data() const { return grad_->data.data(); }

 private:
  friend class BackwardContext;
  std::unique_lock<std::mutex> lock_;
  std::shared_ptr<Storage> grad_;
};

/// What a backward closure sees: the gradient of the op's output, and where to send the
/// gradients of its inputs.
class BackwardContext {
 public:
  /// `pending` holds, during one replay, dL/d(output) of every collected node (by Node::slot).
  BackwardContext(Array& grad, Node& node, std::optional<Array>* pending)
      : grad(grad), grad_(grad), node_(node), pending_(pending) {}
  /// The same for an in-place op's closure run on a slice of its base (autograd/views.cpp):
  /// what it gives input 0 (the slice's old values, of shape `self_shape`) lands in
  /// `self_grad` instead of following the node's edge 0.
  BackwardContext(Array& grad, Node& node, std::optional<Array>* pending,
                  const Array::shape_type& self_shape, std::optional<Array>& self_grad)
      : grad(grad), grad_(grad), node_(node), pending_(pending), self_shape_(&self_shape),
        self_grad_(&self_grad) {}
  const Array& grad;  // dL/d(output), same shape as the output
  /// Moves dL/d(output) out, so its buffer can become an input's gradient (computed in
  /// place). Only for the last use: ctx.grad is empty afterwards.
  Array take_grad() { return std::move(grad_); }
  /// For an in-place op's closure run on a view's slice of its base's gradient `g`: a
  /// context on the same node whose gifts to input 0 land in `self_grad` (autograd/views.cpp).
  BackwardContext on_slice(Array& g, const Array::shape_type& self_shape,
                           std::optional<Array>& self_grad) const {
    return BackwardContext(g, node_, pending_, self_shape, self_grad);
  }
  /// Does input i want a gradient? Skip the work if not.
  bool needs(size_t i) const;
  /// dL/d(input i). It may have the broadcast shape of the input; the engine sums it down to
  /// the input's shape and accumulates it. Any other shape is tg::AutogradError naming the op.
  void give(size_t i, Array g);
  /// A saved value, checked: tg::AutogradError naming the op, the shape and both versions if
  /// an in-place write changed it after it was saved (PyTorch's "modified by an inplace
  /// operation").
  const View& read(const Saved& s) const;
  /// The same check for a value saved with Saved::strided: its element 0, from which the op
  /// steps by the strides it recorded.
  const float* read_data(const Saved& s) const;
  /// Input i's .grad() to add its gradient into, in place, for an op that can fold the sum
  /// into its kernel (dW = Gᵀx by a GEMM with beta = 1, no buffer, no extra pass); empty
  /// where it must give() instead. Only a leaf whose .grad() exists (a zero_grad() in place
  /// leaves zeros; set_to_none leaves none), dense float32 of the leaf's shape and none of
  /// the storages the op reads (`reads`), outside autograd::grad and backward(inputs) (the
  /// leaf's .grad() is not theirs to touch) and outside anomaly mode (which inspects every
  /// gradient given). Holding it counts as giving input i its gradient.
  LeafGrad leaf_grad(size_t i, std::initializer_list<const Storage*> reads = {}) const;

 private:
  void check_version(const Saved& s) const;

  Array& grad_;
  Node& node_;
  std::optional<Array>* pending_;
  const Array::shape_type* self_shape_ = nullptr;
  std::optional<Array>* self_grad_ = nullptr;
};

using BackwardFn = std::function<void(BackwardContext&)>;

/// Where the gradient of one input goes: to the node that produced it, or into the leaf's
/// .grad(); neither where the input needs no gradient.
struct Edge {
  std::shared_ptr<Node> fn;          // the input came out of this op
  std::shared_ptr<TensorImpl> leaf;  // or it is this leaf (kept, as PyTorch's AccumulateGrad)
  bool defined() const { return fn || leaf; }
};

/// One entry of the tape: an op's name, edges to its inputs' producers and its backward
/// closure (with what it saved).
struct Node {
  const char* name = "";
  uint64_t seq = 0;                                // execution order
  std::vector<Edge> next;                          // one per input
  Array::shape_type shape;                         // the output's (its gradient's) shape
  std::weak_ptr<TensorImpl> output;                // for retain_grad
  BackwardFn backward;                             // freed after backward, with what it saved
  uint32_t visited = 0;                            // the replay that last collected it
  uint32_t slot = 0;                               // its place in that replay's order
  bool released = false;
  uint32_t module = 0;                             // anomaly mode: the module scope that recorded it

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();  // tears any graph down without recursion, whatever its closures hold
};

/// A new node for op `name` with an edge to each input's history (or leaf), whose output has
/// `shape`; `output` is for retain_grad.
std::shared_ptr<Node> make_node(const char* name, const Tensor* inputs, size_t n,
                                const Array::shape_type& shape, BackwardFn fn,
                                const std::shared_ptr<TensorImpl>& output);

/// A view's history follows in-place writes to its base: after one gave the base a new
/// history, an op that reads the view gets a history that goes through it (PyTorch
/// regenerates a view's grad_fn the same way). Called wherever the tape reads a history.
void regenerate_view_history(const std::shared_ptr<TensorImpl>& view);
/// A view made in no-grad mode does not follow (as in PyTorch): once its base has a new
/// history, using it where a history is read throws tg::AutogradError.
inline void refresh_view(const std::shared_ptr<TensorImpl>& t) {
  if (t->vi && t->vi->base && t->vi->base_history != t->vi->base->history)
    regenerate_view_history(t);
}
/// An in-place op on a view, recorded (record_inplace): the base's history becomes the write
/// (the op's closure run on the view's slice of the base's gradient, PyTorch's CopySlices)
/// and the view's history a view of that.
void rebase_through_view(const char* name, const Tensor& self, const std::vector<Tensor>& inputs,
                         BackwardFn fn);

/// Wraps a fresh value as a tensor, recording `fn` on the tape when grad mode is on and
/// some input requires a gradient.
Tensor record(const char* name, Array value, const std::vector<Tensor>& inputs, BackwardFn fn);
/// The same with the output's storage made by the op (which saved it for its backward).
Tensor record(const char* name, std::shared_ptr<Storage> value, const std::vector<Tensor>& inputs,
              BackwardFn fn);
/// The same for a braced list `{a, b}`, which then needs no vector.
Tensor record(const char* name, Array value, std::initializer_list<Tensor> inputs, BackwardFn fn);
Tensor record(const char* name, std::shared_ptr<Storage> value, std::initializer_list<Tensor> inputs,
              BackwardFn fn);
/// An in-place op on `self`: its values have been written (and its version bumped) by the
/// caller; when grad mode is on and `self` or another input requires a gradient, `fn` becomes
/// self's history (PyTorch's rebase): inputs[0] stands for self as it was before the write.
/// Refuses (tg::AutogradError) an in-place write on a leaf that requires grad, outside
/// no-grad; check_inplace() says so before the caller writes.
void record_inplace(const char* name, const Tensor& self, const std::vector<Tensor>& inputs,
                    BackwardFn fn);
/// Throws tg::AutogradError if `self` is a leaf that requires grad and grad mode is on.
void check_inplace(const Tensor& self, const char* op);
/// True if recording `inputs` would create a node (lets ops skip saving work).
bool any_requires_grad(const Tensor* inputs, size_t n);
/// The same for a few tensors, without building a vector: will an op on them be recorded?
template <class... T>
bool will_record(const T&... ts) {
  if (!is_grad_enabled()) return false;
  (..., (ts.defined() ? refresh_view(ts.impl()) : void()));
  return (... || (ts.defined() && ts.impl()->requires_grad));
}

/// The overloads every op calls: a closure of the op's own type, made into a BackwardFn (a
/// heap allocation) only when a node will hold it, so that ops in no-grad mode pay nothing
/// for their backward.
template <class V, class F,
          class = std::enable_if_t<!std::is_same<std::decay_t<F>, BackwardFn>::value>>
Tensor record(const char* name, V&& value, std::initializer_list<Tensor> inputs, F&& fn) {
  if (!any_requires_grad(inputs.begin(), inputs.size()))
    return record(name, std::forward<V>(value), inputs, BackwardFn());
  return record(name, std::forward<V>(value), inputs, BackwardFn(std::forward<F>(fn)));
}
template <class V, class F,
          class = std::enable_if_t<!std::is_same<std::decay_t<F>, BackwardFn>::value>>
Tensor record(const char* name, V&& value, const std::vector<Tensor>& inputs, F&& fn) {
  if (!any_requires_grad(inputs.data(), inputs.size()))
    return record(name, std::forward<V>(value), inputs, BackwardFn());
  return record(name, std::forward<V>(value), inputs, BackwardFn(std::forward<F>(fn)));
}

/// A view op: `view` (a new impl over input's storage, its geometry and base set) gets
/// `fn` as its history when the input requires a gradient.
Tensor record_view(const char* name, std::shared_ptr<TensorImpl> view, const Tensor& input,
                   BackwardFn fn);
template <class F,
          class = std::enable_if_t<!std::is_same<std::decay_t<F>, BackwardFn>::value>>
Tensor record_view(const char* name, std::shared_ptr<TensorImpl> view, const Tensor& input,
                   F&& fn) {
  if (!will_record(input)) return record_view(name, std::move(view), input, BackwardFn());
  return record_view(name, std::move(view), input, BackwardFn(std::forward<F>(fn)));
}

/// Replays the tape from `root` (Tensor::backward).
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

/// Sums g down to `target` (the reverse of broadcasting): the engine does this for every
/// gradient an op gives, so no op has to.
Array sum_to(const Array& g, const Shape& target);
/// True if `from` broadcasts to exactly `to` (numpy rules, `to` no smaller).
bool broadcasts_to(const Shape& from, const Shape& to);

}  // namespace detail
}  // namespace tg
