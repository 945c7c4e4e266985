// tg::autograd::Function (tapegrad/autograd/function.h): the context, saved values, and the
// recording of a function with several outputs on a tape whose nodes have one.
//
// The function is one node over all its inputs, whose "output" is every output flattened and
// laid end to end: (total,) with total = Σ numel. Each output tensor gets a small node of its
// own that places its gradient in its segment of a zero (total,) vector and gives that to the
// function's node; the engine sums the segments, and the function's backward reads them back
// as one gradient per output (zeros where none arrived).
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/shape.h"
#include "tapegrad/autograd/function.h"

namespace tg {
namespace autograd {
using namespace tg::detail;

// ---- SavedValue ------------------------------------------------------------------------------

const char* SavedValue::type_name() const {
  static const char* names[] = {"none", "double", "int", "bool", "Tensor", "string", "int list"};
  return names[v_.index()];
}

namespace {
template <class T>
const T& get_as(const std::variant<std::monostate, double, int64_t, bool, Tensor, std::string,
                                   std::vector<int64_t>>& v,
                const SavedValue& self, const char* want) {
  if (const T* p = std::get_if<T>(&v)) return *p;
  throw ValueError(std::string("saved_data: the value is a ") + self.type_name() + ", not a " +
                   want);
}
}  // namespace

double SavedValue::toDouble() const { return get_as<double>(v_, *this, "double"); }
int64_t SavedValue::toInt() const { return get_as<int64_t>(v_, *this, "int"); }
bool SavedValue::toBool() const { return get_as<bool>(v_, *this, "bool"); }
const Tensor& SavedValue::toTensor() const { return get_as<Tensor>(v_, *this, "Tensor"); }
const std::string& SavedValue::toStringRef() const {
  return get_as<std::string>(v_, *this, "string");
}
const std::vector<int64_t>& SavedValue::toIntVector() const {
  return get_as<std::vector<int64_t>>(v_, *this, "int list");
}

// ---- AutogradContext -------------------------------------------------------------------------

void AutogradContext::save_for_backward(variable_list to_save) {
  saved_.clear();
  saved_versions_.clear();
  for (size_t i = 0; i < to_save.size(); ++i) {
    const Tensor& t = to_save[i];
    if (!t.defined()) {  // kept as a hole, as PyTorch allows None
      saved_.emplace_back();
      saved_versions_.push_back(0);
      continue;
    }
    // A detached handle: the same values and version counter, none of the history (an
    // input's history is the function's own edges; keeping it here could make a cycle).
    saved_.push_back(t.detach());
    saved_versions_.push_back(t.version());
  }
}

variable_list AutogradContext::get_saved_variables() const {
  for (size_t i = 0; i < saved_.size(); ++i) {
    if (!saved_[i].defined()) continue;
    const uint32_t now = saved_[i].version();
    if (now != saved_versions_[i])
      throw AutogradError(
          "function '" + name_ + "': saved tensor " + std::to_string(i) + " (shape " +
          to_string(saved_[i].shape()) +
          "), needed for gradient computation, has been modified by an inplace operation: it "
          "is at version " + std::to_string(now) + "; expected version " +
          std::to_string(saved_versions_[i]) +
          " (when save_for_backward saved it). Compute from a clone() instead, or write in "
          "place after backward()");
  }
  return saved_;
}

void AutogradContext::mark_non_differentiable(const variable_list& outputs) {
  for (const Tensor& t : outputs)
    if (t.defined()) non_differentiable_.push_back(t.impl().get());
}

bool AutogradContext::needs_input_grad(size_t index) const {
  if (index >= needs_input_grad_.size())
    throw IndexError("function '" + name_ + "': needs_input_grad(" + std::to_string(index) +
                     ") is out of range; forward has " +
                     std::to_string(needs_input_grad_.size()) + " arguments after ctx");
  return needs_input_grad_[index] != 0;
}

// ---- recording -------------------------------------------------------------------------------

namespace detail {

std::string function_name(const std::type_info& type) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : type.name();
  std::free(demangled);
  // "(anonymous namespace)::ns::MulAdd" -> "MulAdd" (template arguments kept whole).
  const size_t args = name.find('<');
  const size_t colon = name.rfind("::", args == std::string::npos ? std::string::npos : args);
  return colon == std::string::npos ? name : name.substr(colon + 2);
}

void begin_function(AutogradContext& ctx, const FunctionArgs& args, std::string name) {
  ctx.name_ = std::move(name);
  const bool mode = is_grad_enabled();
  ctx.needs_input_grad_.resize(args.tensors.size());
  for (size_t i = 0; i < args.tensors.size(); ++i) {
    const Tensor& t = args.tensors[i];
    ctx.needs_input_grad_[i] = mode && t.defined() && t.requires_grad();
  }
}

variable_list finish_function(std::shared_ptr<AutogradContext> ctx, const FunctionArgs& args,
                              variable_list outputs, FunctionBackward backward) {
  const std::string& name = ctx->name_;
  if (outputs.empty()) throw ValueError("function '" + name + "': forward returned no outputs");
  // Each output becomes a tensor of its own over a storage nobody else holds, so that a write
  // to it is a write to nothing else: a value aliasing an input or another output (forward
  // returning its input), a view, or a tensor with autograd meaning (a parameter forward
  // reached by other means) is copied. Otherwise the storage is taken as is and a saved
  // output keeps its version counter.
  std::set<const Storage*> taken;
  for (const Tensor& t : args.tensors)
    if (t.defined()) taken.insert(t.impl()->storage.get());
  std::vector<std::shared_ptr<Storage>> values;
  std::vector<char> differentiable;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    if (!t.defined())
      throw ValueError("function '" + name + "': forward returned an undefined tensor as output " +
                       std::to_string(i));
    const TensorImpl& impl = *t.impl();
    const bool whole = !impl.vi && !impl.requires_grad && !impl.grad_fn;
    if (whole && taken.insert(impl.storage.get()).second)
      values.push_back(impl.storage);
    else
      values.push_back(make_storage(dense_copy(impl)));
    const auto& nd = ctx->non_differentiable_;
    differentiable.push_back(std::find(nd.begin(), nd.end(), &impl) == nd.end());
  }

  const variable_list& inputs = args.tensors;
  const bool recorded = any_requires_grad(inputs.data(), inputs.size()) &&
                      std::any_of(differentiable.begin(), differentiable.end(),
                                  [](char d) { return d != 0; });
  variable_list wrapped;
  if (!recorded) {
    for (auto& v : values) wrapped.emplace_back(impl_over(std::move(v)));
    return wrapped;
  }

  // The outputs laid end to end: where each starts, and its shape.
  std::vector<size_t> offsets;
  std::vector<Array::shape_type> shapes;
  size_t total = 0;
  for (const auto& v : values) {
    offsets.push_back(total);
    shapes.push_back(v->data.shape());
    total += v->data.size();
  }
  std::vector<Shape> input_shapes;
  for (const Tensor& t : inputs) input_shapes.push_back(t.defined() ? t.shape() : Shape{});
  const char* op = intern_op_name(name);

  // The function's node: dL/d(every output), flattened, in; one gradient per input out.
  //   inputs_k ← backward(ctx, [g_0, g_1, ...])
  BackwardFn fn = [ctx, backward, op, offsets, shapes, input_shapes,
                   is_tensor = args.is_tensor](BackwardContext& c) {
    variable_list grad_outputs;
    for (size_t i = 0; i < shapes.size(); ++i) {
      Array g(shapes[i]);
      std::copy_n(c.grad.data() + offsets[i], g.size(), g.data());
      grad_outputs.push_back(make_leaf(std::move(g)));
    }
    for (size_t k = 0; k < is_tensor.size(); ++k) ctx->needs_input_grad_[k] = c.needs(k);
    variable_list grads;
    {
      NoGradGuard no_grad;
      grads = backward(ctx.get(), std::move(grad_outputs));
    }
    if (grads.size() != is_tensor.size())
      throw ValueError(std::string("function '") + op + "': backward returned " +
                       std::to_string(grads.size()) + " gradients, expected " +
                       std::to_string(is_tensor.size()) +
                       " (one per forward argument after ctx; Tensor() for one that is not a "
                       "tensor or needs none)");
    for (size_t k = 0; k < grads.size(); ++k) {  // every gradient checked before any is given
      if (!grads[k].defined()) continue;
      if (!is_tensor[k])
        throw ValueError(std::string("function '") + op + "': backward returned a gradient for "
                         "argument " + std::to_string(k) +
                         ", which is not a tensor; return an undefined Tensor() there");
      const Shape gs = grads[k].shape();
      if (!broadcasts_to(input_shapes[k], gs))
        throw ShapeError(std::string("function '") + op + "': backward returned a gradient of "
                         "shape " + to_string(gs) + " for argument " + std::to_string(k) +
                         " of shape " + to_string(input_shapes[k]));
    }
    for (size_t k = 0; k < grads.size(); ++k)
      if (grads[k].defined() && c.needs(k)) c.give(k, dense_copy(*grads[k].impl()));
  };
  auto node = make_node(op, inputs.data(), inputs.size(), Array::shape_type{total}, std::move(fn),
                        nullptr);

  // A stand-in for the flattened outputs, through which each output's node reaches the
  // function's: its history is the function's node.
  auto flat = impl_over(make_storage(Array(Array::shape_type{0})));
  flat->grad_fn = std::move(node);
  flat->requires_grad = true;
  const Tensor flat_outputs(std::move(flat));
  for (size_t i = 0; i < values.size(); ++i) {
    if (!differentiable[i]) {
      wrapped.emplace_back(impl_over(std::move(values[i])));
      continue;
    }
    // output i = segment i of the flattened outputs       dflat = g placed in segment i
    wrapped.push_back(record(op, std::move(values[i]), {flat_outputs},
                             [offset = offsets[i], total](BackwardContext& c) {
                               Array flat_grad = xt::zeros<float>({total});
                               std::copy_n(c.grad.data(), c.grad.size(), flat_grad.data() + offset);
                               c.give(0, std::move(flat_grad));
                             }));
  }
  return wrapped;
}

}  // namespace detail
}  // namespace autograd
}  // namespace tg
