#pragma once
// Library-internal, the autograd layer: the tape's node, what a backward closure sees, and
// record(), through which every op puts itself on the tape. Not installed.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <vector>

#include "core/storage.h"
#include "tapegrad/autograd.h"

namespace tg {
namespace detail {

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

/// Replays the tape from `root` (Tensor::backward).
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

/// Sums g down to `target` (the reverse of broadcasting): the engine does this for every
/// gradient an op gives, so no op has to.
Array sum_to(const Array& g, const Shape& target);
/// True if `from` broadcasts to exactly `to` (numpy rules, `to` no smaller).
bool broadcasts_to(const Shape& from, const Shape& to);

}  // namespace detail
}  // namespace tg
