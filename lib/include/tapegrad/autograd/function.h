#pragma once
// tg::autograd::Function: an op of your own with several inputs and outputs and a context
// object, as torch::autograd::Function in LibTorch (tg::custom_op is the one-output shortcut).
//
//   using tg::autograd::AutogradContext;  using tg::autograd::variable_list;
//   struct MulAdd : tg::autograd::Function<MulAdd> {   // (a, b, s) -> (s·a·b, a + b)
//     static variable_list forward(AutogradContext* ctx, Tensor a, Tensor b, double s) {
//       ctx->save_for_backward({a, b});
//       ctx->saved_data["s"] = s;
//       return {a * b * static_cast<float>(s), a + b};
//     }
//     static variable_list backward(AutogradContext* ctx, variable_list g) {
//       const auto saved = ctx->get_saved_variables();   // {a, b}, checked
//       const float s = static_cast<float>(ctx->saved_data["s"].toDouble());
//       return {g[0] * saved[1] * s + g[1], g[0] * saved[0] * s + g[1], Tensor()};
//     }
//   };
//   variable_list y = MulAdd::apply(a, b, 2.0);
//
// forward runs with recording off. Its arguments after ctx are tensors, lists of tensors
// (each tensor counts as one argument) or anything else; it returns a Tensor (apply then
// returns one) or a variable_list. backward gets one gradient per output (zeros for an output
// no gradient reached, or one marked non-differentiable) and returns one per forward argument:
// an undefined Tensor() for one that is not a tensor or needs no gradient. A gradient may
// have the broadcast shape of its input (it is summed down), never another one.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <variant>
#include <vector>

#include "tapegrad/autograd.h"
#include "tapegrad/autograd/grad.h"
#include "tapegrad/tensor.h"

namespace tg {
namespace autograd {

/// A value kept in AutogradContext::saved_data: a number, a flag, a tensor, a string or a
/// list of integers. Read it back with LibTorch's IValue names (toDouble(), toInt(), ...);
/// reading it as another type is tg::ValueError naming both types.
class SavedValue {
 public:
  SavedValue() = default;
  template <class T, std::enable_if_t<std::is_floating_point<T>::value, int> = 0>
  SavedValue(T v) : v_(static_cast<double>(v)) {}  // NOLINT: implicit: saved_data["k"] = 0.5
  template <class T, std::enable_if_t<std::is_integral<T>::value && !std::is_same<T, bool>::value,
                                      int> = 0>
  SavedValue(T v) : v_(static_cast<int64_t>(v)) {}  // NOLINT
  SavedValue(bool v) : v_(v) {}                     // NOLINT
  SavedValue(Tensor v) : v_(std::move(v)) {}        // NOLINT
  SavedValue(std::string v) : v_(std::move(v)) {}   // NOLINT
  SavedValue(const char* v) : v_(std::string(v)) {}  // NOLINT
  SavedValue(std::vector<int64_t> v) : v_(std::move(v)) {}  // NOLINT

  bool isNone() const { return v_.index() == 0; }
  bool isDouble() const { return std::holds_alternative<double>(v_); }
  bool isInt() const { return std::holds_alternative<int64_t>(v_); }
  bool isBool() const { return std::holds_alternative<bool>(v_); }
  bool isTensor() const { return std::holds_alternative<Tensor>(v_); }
  bool isString() const { return std::holds_alternative<std::string>(v_); }
  bool isIntList() const { return std::holds_alternative<std::vector<int64_t>>(v_); }

  double toDouble() const;
  int64_t toInt() const;
  bool toBool() const;
  const Tensor& toTensor() const;
  const std::string& toStringRef() const;
  const std::vector<int64_t>& toIntVector() const;

  /// "double", "int", "bool", "Tensor", "string", "int list" or "none".
  const char* type_name() const;

 private:
  std::variant<std::monostate, double, int64_t, bool, Tensor, std::string, std::vector<int64_t>> v_;
};

template <class Derived>
struct Function;
class AutogradContext;

namespace detail {
using FunctionBackward = variable_list (*)(AutogradContext*, variable_list);

/// The arguments of one Function::apply after ctx, flattened: one entry per tensor (a list
/// gives one per element) and per other argument (an undefined tensor standing for it).
struct FunctionArgs {
  variable_list tensors;
  std::vector<char> is_tensor;
  void add(const Tensor& t) {
    tensors.push_back(t);
    is_tensor.push_back(1);
  }
  void add(const variable_list& list) {
    for (const Tensor& t : list) add(t);
  }
  template <class T>
  void add(const T&) {
    tensors.emplace_back();
    is_tensor.push_back(0);
  }
};

/// The function's name as errors print it: its type's name without namespaces.
std::string function_name(const std::type_info& type);
/// Before forward: ctx learns its name and which arguments need a gradient.
void begin_function(AutogradContext& ctx, const FunctionArgs& args, std::string name);
/// After forward: wraps its outputs, recording the function on the tape when grad mode is on
/// and an input requires grad.
variable_list finish_function(std::shared_ptr<AutogradContext> ctx, const FunctionArgs& args,
                              variable_list outputs, FunctionBackward backward);
}  // namespace detail

/// What forward leaves for backward: saved tensors (version-checked), saved_data, which
/// outputs are not differentiable, and which inputs need a gradient.
class AutogradContext {
 public:
  AutogradContext() = default;
  AutogradContext(const AutogradContext&) = delete;
  AutogradContext& operator=(const AutogradContext&) = delete;

  /// Keeps tensors (inputs or outputs of forward) for backward, replacing any saved before.
  /// Their versions are remembered: see get_saved_variables().
  void save_for_backward(variable_list to_save);
  /// The saved tensors, in order. tg::AutogradError naming the function, the tensor's place
  /// and shape and both versions if one was written in place after it was saved.
  variable_list get_saved_variables() const;
  /// These outputs of forward get no gradient: they do not require grad, and backward sees
  /// zeros for them (integer-like results: indices, masks).
  void mark_non_differentiable(const variable_list& outputs);
  /// Does forward argument `index` (counted as backward's result counts them) need a
  /// gradient? In forward: it is a tensor that requires grad (and grad mode is on); in
  /// backward: its gradient is wanted by this backward pass. tg::IndexError if out of range.
  bool needs_input_grad(size_t index) const;
  /// Anything else backward needs: ctx->saved_data["scale"] = 0.5.
  std::map<std::string, SavedValue> saved_data;
  /// The function's name (its type's, without namespaces).
  const std::string& name() const { return name_; }

 private:
  friend void detail::begin_function(AutogradContext&, const detail::FunctionArgs&, std::string);
  friend variable_list detail::finish_function(std::shared_ptr<AutogradContext>,
                                               const detail::FunctionArgs&, variable_list,
                                               detail::FunctionBackward);
  std::string name_;
  variable_list saved_;
  std::vector<uint32_t> saved_versions_;
  std::vector<const void*> non_differentiable_;  // the outputs' impls
  std::vector<char> needs_input_grad_;
};

/// The base of a custom op: Derived has static forward(AutogradContext*, args...) and
/// backward(AutogradContext*, variable_list); call it as Derived::apply(args...).
template <class Derived>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    auto ctx = std::make_shared<AutogradContext>();
    detail::FunctionArgs flat;
    (flat.add(args), ...);
    detail::begin_function(*ctx, flat, detail::function_name(typeid(Derived)));
    using Out = decltype(Derived::forward(ctx.get(), std::forward<Args>(args)...));
    static_assert(std::is_same<Out, Tensor>::value || std::is_same<Out, variable_list>::value,
                  "Function::forward must return a Tensor or a variable_list");
    variable_list outputs;
    {
      NoGradGuard no_grad;
      if constexpr (std::is_same<Out, Tensor>::value)
        outputs.push_back(Derived::forward(ctx.get(), std::forward<Args>(args)...));
      else
        outputs = Derived::forward(ctx.get(), std::forward<Args>(args)...);
    }
    variable_list wrapped = detail::finish_function(std::move(ctx), flat, std::move(outputs),
                                                    &call_backward);
    if constexpr (std::is_same<Out, Tensor>::value)
      return wrapped.front();
    else
      return wrapped;
  }

 private:
  static variable_list call_backward(AutogradContext* ctx, variable_list grad_outputs) {
    return Derived::backward(ctx, std::move(grad_outputs));
  }
};

}  // namespace autograd
}  // namespace tg
