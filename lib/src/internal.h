#pragma once
// Library-internal: the tensor's storage, the tape's nodes and the helpers that every op
// uses to record itself. Not installed.
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/tensor.h"
#include "tapegrad/xtensor.h"

namespace tg {
namespace detail {

struct Node;

struct TensorImpl {
  std::shared_ptr<Array> value;  // shared so that backward closures can keep it alive
  std::shared_ptr<Array> grad;   // leaves (and retain_grad non-leaves) after backward
  std::shared_ptr<Node> grad_fn; // the op that produced this tensor; null for a leaf
  bool requires_grad = false;
  bool retains_grad = false;
};

/// What a backward closure sees: the gradient of the op's output, and where to send the
/// gradients of its inputs.
class BackwardContext {
 public:
  /// `pending` holds, during one replay, dL/d(output) of every collected node (by Node::slot).
  BackwardContext(Array& grad, Node& node, std::optional<Array>* pending)
      : grad(grad), grad_(grad), node_(node), pending_(pending) {}
  const Array& grad;  // dL/d(output), same shape as the output
  /// Moves dL/d(output) out, so its buffer can become an input's gradient (computed in
  /// place). Only for the last use: ctx.grad is empty afterwards.
  Array take_grad() { return std::move(grad_); }
  /// Does input i want a gradient? Skip the work if not.
  bool needs(size_t i) const;
  /// dL/d(input i). It may have the broadcast shape; the engine sums it down to the input's
  /// shape and accumulates it.
  void give(size_t i, Array g);

 private:
  Array& grad_;
  Node& node_;
  std::optional<Array>* pending_;
};

using BackwardFn = std::function<void(BackwardContext&)>;

/// One entry of the tape: an op's name, its inputs and its backward closure.
/// Kept within 104 bytes (120 with make_shared's count block) so that glibc serves it from
/// its fast bins: the tape allocates and frees one per op.
struct Node {
  const char* name = "";
  uint64_t seq = 0;                                // execution order
  std::vector<std::shared_ptr<TensorImpl>> inputs; // null where no gradient is needed
  std::weak_ptr<TensorImpl> output;                // for retain_grad
  BackwardFn backward;                             // freed after backward
  uint32_t visited = 0;                            // the replay that last collected it
  uint32_t slot = 0;                               // its place in that replay's order
  bool released = false;
  uint32_t module = 0;                             // anomaly mode: the module scope that recorded it

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();  // tears long chains down without recursion
};

inline const Array& val(const Tensor& t) { return *t.impl()->value; }
inline const std::shared_ptr<Array>& saved(const Tensor& t) { return t.impl()->value; }

/// Wraps a fresh value as a tensor, recording `fn` on the tape when grad mode is on and
/// some input requires a gradient.
Tensor record(const char* name, Array value, const std::vector<Tensor>& inputs, BackwardFn fn);
Tensor record(const char* name, std::shared_ptr<Array> value, const std::vector<Tensor>& inputs,
              BackwardFn fn);
/// The same for a braced list `{a, b}`, which then needs no vector.
Tensor record(const char* name, Array value, std::initializer_list<Tensor> inputs, BackwardFn fn);
Tensor record(const char* name, std::shared_ptr<Array> value, std::initializer_list<Tensor> inputs,
              BackwardFn fn);
/// True if recording `inputs` would create a node (lets ops skip saving work).
bool any_requires_grad(const std::vector<Tensor>& inputs);

Tensor make_leaf(Array value, bool requires_grad = false);

/// Throws ValueError("<op>: <what> is undefined") for an undefined tensor (a default-built
/// tg::Tensor), which would otherwise be dereferenced.
inline void require_defined(const Tensor& t, const char* op, const char* what = "the input") {
  if (!t.defined()) throw ValueError(std::string(op) + ": " + what + " is undefined");
}

// ---- anomaly detection (anomaly.cpp) -------------------------------------------------------
extern std::atomic<bool> anomaly_flag;
inline bool anomaly_on() { return anomaly_flag.load(std::memory_order_relaxed); }
/// The id of the innermost ModuleScope on this thread (0: none).
uint32_t current_module_id();
/// Throws AnomalyError if op `name`'s output holds NaN (or Inf from finite inputs).
void check_forward(const char* name, const Array& out, const Tensor* inputs, size_t n);
/// Throws AnomalyError if `g`, the gradient `node` gives its input i, holds NaN or Inf.
/// `grad_out` is the gradient the node received (may be empty if the closure took it).
void check_gradient(const Node& node, size_t i, const Array& g, const Array& grad_out);
/// Throws AnomalyError if the gradient backward() starts from holds NaN or Inf.
void check_seed(const Node* root, const Array& seed);

// ---- shape helpers ----------------------------------------------------------------------
Shape shape_of(const Array& a);
std::vector<size_t> to_xshape(const Shape& s);
int64_t numel_of(const Shape& s);
/// Maps a possibly negative axis into [0, rank); throws IndexError naming the op.
size_t norm_axis(int64_t axis, size_t rank, const char* op);
/// numpy broadcasting of two shapes; throws ShapeError naming the op.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// Sums g down to `target` (the reverse of broadcasting).
Array sum_to(const Array& g, const Shape& target);
/// A row-major shape seen as (outer, n, inner) around one axis: element (o, i, j) sits at
/// (o * n + i) * inner + j. Most axis-wise kernels loop over this.
struct AxisSplit {
  size_t outer = 1, n = 1, inner = 1;
};
AxisSplit split_at(const Shape& shape, size_t axis);
[[noreturn]] void shape_error(const char* op, const std::string& what);

}  // namespace detail
}  // namespace tg
