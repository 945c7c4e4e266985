// tg::autograd::grad and tg::autograd::backward (tapegrad/autograd/grad.h), and
// Tensor::backward(grad, retain_graph, inputs): the checks of the public calls, on the
// engine's general replay (autograd/engine.h).
#include "autograd/engine.h"
#include "tapegrad/autograd/grad.h"

namespace tg {
using namespace detail;

namespace {
/// Every input is defined and requires grad: tg::AutogradError naming the first that is not.
void check_inputs(const std::vector<Tensor>& inputs, const char* what) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      throw AutogradError(std::string(what) + ": input " + std::to_string(i) + " is undefined");
    if (!inputs[i].requires_grad())
      throw AutogradError(std::string(what) + ": input " + std::to_string(i) + " (shape " +
                          to_string(inputs[i].shape()) +
                          ") does not require grad, so no gradient can reach it");
  }
}

void check_outputs(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grads,
                   bool create_graph, const char* what) {
  if (create_graph)
    throw ValueError(std::string(what) +
                     ": create_graph = true (differentiating the gradients) is not supported "
                     "yet; tapegrad's backward closures are not recorded");
  if (outputs.empty()) throw ValueError(std::string(what) + ": no outputs to differentiate");
  if (!grads.empty() && grads.size() != outputs.size())
    throw ValueError(std::string(what) + ": got " + std::to_string(grads.size()) +
                     " gradients for " + std::to_string(outputs.size()) +
                     " outputs; give one per output, or none");
}
}  // namespace

namespace autograd {

variable_list grad(const variable_list& outputs, const variable_list& inputs,
                   const variable_list& grad_outputs, std::optional<bool> retain_graph,
                   bool create_graph, bool allow_unused) {
  const char* what = "autograd::grad";
  check_outputs(outputs, grad_outputs, create_graph, what);
  if (inputs.empty())
    throw ValueError("autograd::grad: no inputs to differentiate with respect to");
  check_inputs(inputs, what);
  variable_list out = run_backward(outputs, grad_outputs, retain_graph.value_or(create_graph),
                                   inputs, Deliver::kReturn, what);
  if (!allow_unused)
    for (size_t i = 0; i < out.size(); ++i)
      if (!out[i].defined())
        throw AutogradError("autograd::grad: input " + std::to_string(i) + " (shape " +
                            to_string(inputs[i].shape()) +
                            ") appears not to have been used in the graph (no path from the "
                            "outputs reaches it); pass allow_unused = true to get an undefined "
                            "tensor for it");
  return out;
}

void backward(const variable_list& tensors, const variable_list& grad_tensors,
              std::optional<bool> retain_graph, bool create_graph, const variable_list& inputs) {
  const char* what = "autograd::backward";
  check_outputs(tensors, grad_tensors, create_graph, what);
  check_inputs(inputs, what);
  run_backward(tensors, grad_tensors, retain_graph.value_or(create_graph), inputs,
               inputs.empty() ? Deliver::kAllLeaves : Deliver::kInputsGrad, what);
}

}  // namespace autograd

void Tensor::backward(const Tensor& grad, bool retain_graph,
                      const std::vector<Tensor>& inputs) const {
  if (inputs.empty())
    throw ValueError("backward: the inputs list is empty; leave it out to accumulate into "
                     "every leaf");
  check_inputs(inputs, "backward");
  run_backward({*this}, {grad}, retain_graph, inputs, Deliver::kInputsGrad, "backward");
}

}  // namespace tg
