#pragma once
// tg::nn::ModuleHolder<M>: a std::shared_ptr<M> that can be called, so that a registered
// submodule reads as in LibTorch and PyTorch:
//
//   struct Net : tg::nn::Module {
//     tg::nn::ModuleHolder<tg::nn::Linear> fc1, fc2;
//     Net() : Module("Net") {
//       fc1 = register_module("fc1", std::make_shared<tg::nn::Linear>(784, 64));
//       fc2 = register_module("fc2", std::make_shared<tg::nn::Linear>(64, 10));
//     }
//     tg::Tensor forward(const tg::Tensor& x) { return fc2(tg::relu(fc1(x))); }
//   };
//
// fc1(args...) is fc1->forward(args...). Being a shared_ptr, a holder goes wherever one is
// taken (std::shared_ptr<Linear> or <Module> variables, std::dynamic_pointer_cast,
// Sequential(...)), and fc1->, *fc1, fc1.get() work as before. A holder of a plain Module
// (a ModuleList item) is called as a tensor -> tensor module: if it is not one, the call
// throws tg::ValueError naming its path and type.
//
// Unlike LibTorch (whose holders construct their module by default), a default-constructed
// holder is empty, and calling it throws tg::ValueError.
#include <memory>
#include <type_traits>
#include <utility>

#include "tapegrad/tensor.h"

namespace tg {
namespace nn {

class Module;

namespace impl {
/// m(x) for a module known only as a Module: its UnaryModule::forward, or tg::ValueError
/// naming m's path and type if it is not a tensor -> tensor module.
Tensor forward_as_unary(Module& m, const Tensor& x);
/// tg::ValueError: "calling an empty module holder (<what>)".
[[noreturn]] void throw_empty_holder(const char* what);
}  // namespace impl

template <class M>
class ModuleHolder : public std::shared_ptr<M> {
 public:
  /// Empty (no module yet).
  ModuleHolder() = default;
  ModuleHolder(std::nullptr_t) {}  // NOLINT: implicit, as shared_ptr's
  ModuleHolder(std::shared_ptr<M> module) : std::shared_ptr<M>(std::move(module)) {}  // NOLINT
  /// From a pointer to a module derived from M.
  template <class D, class = std::enable_if_t<std::is_convertible<D*, M*>::value>>
  ModuleHolder(std::shared_ptr<D> module) : std::shared_ptr<M>(std::move(module)) {}  // NOLINT
  /// Constructs the module: ModuleHolder<Linear>(784, 64) is std::make_shared<Linear>(784, 64).
  template <class A0, class... Args,
            class = std::enable_if_t<std::is_constructible<M, A0&&, Args&&...>::value &&
                                     !std::is_convertible<A0&&, std::shared_ptr<M>>::value>>
  explicit ModuleHolder(A0&& a0, Args&&... args)
      : std::shared_ptr<M>(std::make_shared<M>(std::forward<A0>(a0), std::forward<Args>(args)...)) {}

  /// The held module's forward(args...).
  template <class... Args, class T = M>
  auto operator()(Args&&... args) const -> decltype(std::declval<T&>().forward(std::forward<Args>(args)...)) {
    if (!*this) impl::throw_empty_holder("it has no forward to call");
    return (*this)->forward(std::forward<Args>(args)...);
  }
  /// A module known only as a Module (a ModuleList item), called as tensor -> tensor.
  template <class T = M, class = std::enable_if_t<std::is_same<T, Module>::value>>
  Tensor operator()(const Tensor& x) const {
    if (!*this) impl::throw_empty_holder("a ModuleList item");
    return impl::forward_as_unary(**this, x);
  }

  /// The shared_ptr itself.
  const std::shared_ptr<M>& ptr() const { return *this; }
  bool is_empty() const { return !*this; }
};

}  // namespace nn
}  // namespace tg
