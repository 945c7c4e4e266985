#pragma once
// Library-internal, the autograd layer: the engine's general entry, behind
// tg::autograd::grad and backward(inputs) (autograd/grad.cpp), and what custom ops and
// Functions share (custom_op.cpp, function.cpp). Not installed.
#include <string>
#include <vector>

#include "autograd/node.h"

namespace tg {
namespace detail {

/// Tape nodes name their op with a const char*: a custom op's or Function's name, kept
/// alive until exit (custom_op.cpp).
const char* intern_op_name(const std::string& name);

/// Where a replay puts the gradients it reaches.
enum class Deliver {
  kAllLeaves,   // into every leaf's .grad() (and retained non-leaves'): Tensor::backward
  kInputsGrad,  // into the .grad() of `inputs` only, leaves or not: backward(..., inputs)
  kReturn,      // returned, one per input; no .grad() is touched: autograd::grad
};

/// Replays the tape from every root at once, each seeded by its entry of `grads` (undefined
/// or missing: ones, for a root of one element). With kInputsGrad or kReturn only the nodes on
/// a path from a root to an input run (and are freed unless retain_graph); the others keep
/// their saved values. kReturn gives the gradient of each input, undefined where no path
/// reached it. The inputs are defined and require grad (the caller checks). `what` starts
/// every error message.
std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                                 bool retain_graph, const std::vector<Tensor>& inputs,
                                 Deliver deliver, const char* what);

}  // namespace detail
}  // namespace tg
