#pragma once
// TG_ARG: how every options struct of tapegrad declares an option, once. It gives a chained
// setter `name(value)` that returns the struct, a getter `name()`, and the private member
// `name_` behind both; a default follows the macro:
//
//   struct LinearOptions {
//     LinearOptions(int64_t in_features, int64_t out_features)
//         : in_features_(in_features), out_features_(out_features) {}
//     TG_ARG(int64_t, in_features);
//     TG_ARG(int64_t, out_features);
//     TG_ARG(bool, bias) = true;
//   };
//   auto o = LinearOptions(768, 64).bias(false);   o.in_features() == 768
//
// The macro leaves the struct in a private section, so options come last in a struct.
// TG_ARG_RETURNING(R, T, name) is the same with the setter returning R: for a base that is
// templated on the struct derived from it (the setter then returns the derived struct).

/// One option: setter name(v) returning the struct, getter name(), member name_.
#define TG_ARG(T, name) TG_ARG_RETURNING(decltype(*this), T, name)

#define TG_ARG_RETURNING(R, T, name)                                \
 public:                                                            \
  auto name(const T& new_value)->R {                                \
    this->name##_ = new_value;                                      \
    return static_cast<R>(*this);                                   \
  }                                                                 \
  const T& name() const noexcept { return this->name##_; }          \
                                                                    \
 private:                                                           \
  T name##_
