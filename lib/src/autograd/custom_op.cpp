// tg::custom_op: ops written by users with the public API, recorded on the tape like ours.
#include <mutex>
#include <set>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/shape.h"

namespace tg {
using namespace detail;

namespace detail {
const char* intern_op_name(const std::string& name) {
  static std::mutex mutex;
  static auto* names = new std::set<std::string>;  // never destroyed: nodes may outlive statics
  std::lock_guard<std::mutex> lock(mutex);
  return names->insert(name).first->c_str();
}
}  // namespace detail

Tensor custom_op(const std::string& name, const Tensor& value, const std::vector<Tensor>& inputs,
                 CustomBackward backward) {
  if (name.empty()) throw ValueError("custom_op: the name is empty");
  if (!value.defined()) throw ValueError("custom_op '" + name + "': the value is undefined");
  if (!backward) throw ValueError("custom_op '" + name + "': the backward function is empty");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined())
      throw ValueError("custom_op '" + name + "': input " + std::to_string(i) + " is undefined");
  const char* op = intern_op_name(name);
  // The node's value is a copy, so the op's result never aliases a tensor the caller keeps.
  auto out = make_storage(dense_copy(*value.impl()));
  const size_t n = inputs.size();
  std::vector<Shape> shapes;
  for (const auto& t : inputs) shapes.push_back(t.shape());
  return record(op, std::move(out), inputs,
                [op, n, shapes = std::move(shapes), backward = std::move(backward)](BackwardContext& ctx) {
    std::vector<Tensor> grads;
    {
      NoGradGuard no_grad;
      grads = backward(make_leaf(Array(ctx.grad)));
    }
    if (grads.size() != n)
      throw ValueError(std::string("custom_op '") + op + "': backward returned " +
                       std::to_string(grads.size()) + " gradients for " + std::to_string(n) +
                       " inputs");
    for (size_t i = 0; i < n; ++i) {
      if (!grads[i].defined() || !ctx.needs(i)) continue;
      // A gradient may have the broadcast shape of its input, never another one.
      const Shape gs = grads[i].shape();
      const bool fits = broadcasts_to(shapes[i], gs);
      if (!fits)
        throw ShapeError(std::string("custom_op '") + op + "': backward returned a gradient of shape " +
                         to_string(gs) + " for input " + std::to_string(i) + " of shape " +
                         to_string(shapes[i]));
      ctx.give(i, dense_copy(*grads[i].impl()));
    }
  });
}

}  // namespace tg
