#pragma once
// tg::nn::Cloneable<Derived, Base = Module>: derive from it instead of Base to gain
// Module::clone(), a deep copy (as LibTorch's torch::nn::Cloneable).
//
//   struct Net : tg::nn::Cloneable<Net> {
//     NetOptions options;
//     explicit Net(const NetOptions& o) : Cloneable("Net"), options(o) { ... register ... }
//   };
//   auto copy = std::dynamic_pointer_cast<Net>(net->clone());
//
// How it copies: it builds a fresh Derived, from `Derived(options)` if Derived has a member
// `options` it can be built from (every built-in module), else from `Derived()`; then it
// copies every parameter's and buffer's values (and requires_grad) and every training flag
// into it. The constructor must therefore register everything (as the built-in modules do);
// building it leaves the global random generator as it was.
#include <memory>
#include <type_traits>
#include <utility>

#include "tapegrad/nn/module.h"
#include "tapegrad/random.h"

namespace tg {
namespace nn {

namespace impl {
template <class T, class = void>
struct has_options : std::false_type {};
template <class T>
struct has_options<T, std::void_t<decltype(std::declval<const T&>().options)>>
    : std::is_constructible<T, decltype(std::declval<const T&>().options)> {};
template <class>
struct always_false : std::false_type {};
}  // namespace impl

template <class Derived, class Base = Module>
class Cloneable : public Base {
 public:
  using Base::Base;

  /// A deep copy of this module, as a Derived (see above).
  std::shared_ptr<Module> clone() const override {
    const auto& self = static_cast<const Derived&>(*this);
    const auto rng = default_generator().state();  // constructors draw initial weights
    std::shared_ptr<Derived> copy;
    if constexpr (impl::has_options<Derived>::value) {
      copy = std::make_shared<Derived>(self.options);
    } else if constexpr (std::is_default_constructible<Derived>::value) {
      copy = std::make_shared<Derived>();
    } else {
      static_assert(impl::always_false<Derived>::value,
                    "Cloneable<M> builds a fresh M from M(options) (a member named options) or M()");
    }
    default_generator().set_state(rng);
    impl::copy_module_state(self, *copy, "clone() of " + self.where());
    return copy;
  }
};

}  // namespace nn
}  // namespace tg
