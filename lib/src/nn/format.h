#pragma once
// Library-internal, the nn layer: how module reprs and error messages print an option's value.
// Not installed.
#include <sstream>
#include <string>

namespace tg {
namespace detail {

/// As operator<< prints it: "0.1", "1e-05".
inline std::string format_float(float v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace detail
}  // namespace tg
