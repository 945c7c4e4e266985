#pragma once
// tg::autograd::grad and tg::autograd::backward: the gradients of some outputs with respect to
// some inputs, returned (grad) or accumulated into chosen .grad()s (backward), as
// torch::autograd::grad and torch::autograd::backward.
//
//   Tensor x = tg::randn({3}, true), w = tg::randn({3}, true);
//   Tensor y = tg::sum(w * x * x);
//   auto g = tg::autograd::grad({y}, {x});   // g[0] == 2·w·x; x.grad() and w.grad() untouched
#include <optional>
#include <vector>

#include "tapegrad/tensor.h"

namespace tg {
namespace autograd {

using variable_list = std::vector<Tensor>;

/// dL/d(input) for every input, where L = Σₖ sum(grad_outputs[k] · outputs[k]); returns new
/// tensors (that do not require grad) and touches no .grad(), neither the leaves' nor those
/// of retained non-leaves. Inputs may be leaves or not (a non-leaf's gradient is that of its
/// value: what reaches the op that produced it).
/// - grad_outputs: one per output (empty: all ones); an undefined entry means ones for an
///   output of one element, else it is an error.
/// - retain_graph: keep the saved values of the ops it ran (default: create_graph, so no);
///   ops not on a path to an input are neither run nor freed.
/// - create_graph: differentiating the gradients is not supported yet (tg::ValueError).
/// - allow_unused: an input the outputs do not depend on gets an undefined tensor instead of
///   tg::AutogradError naming its position.
/// An input that does not require grad, or an output that has no history and does not
/// require grad, is tg::AutogradError naming its position.
variable_list grad(const variable_list& outputs, const variable_list& inputs,
                   const variable_list& grad_outputs = {},
                   std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                   bool allow_unused = false);

/// Backpropagates from several tensors at once (one replay), each with its gradient in
/// `grad_tensors` (empty: ones for one-element tensors). With `inputs`, only their .grad()
/// accumulates and only the ops on a path to one of them run (see Tensor::backward).
void backward(const variable_list& tensors, const variable_list& grad_tensors = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
              const variable_list& inputs = {});

}  // namespace autograd
}  // namespace tg
