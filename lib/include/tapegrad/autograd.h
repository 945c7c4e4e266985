#pragma once
// Controls for the tape: turning recording off, and checking gradients numerically.
#include <functional>
#include <string>
#include <vector>

#include "tapegrad/tensor.h"

namespace tg {

/// Is recording on for this thread? (On by default.)
bool is_grad_enabled();
void set_grad_enabled(bool enabled);

/// RAII: no op inside its scope is recorded (optimizer steps, evaluation).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

struct GradcheckOptions {
  double eps = 1e-3;   // central-difference step (float32 data)
  double atol = 1e-3;  // |numeric - analytic| <= atol + rtol * |numeric|
  double rtol = 1e-2;
  uint64_t seed = 1234;  // for the random projection of the output
  GradcheckOptions& set_eps(double v) { eps = v; return *this; }
  GradcheckOptions& set_atol(double v) { atol = v; return *this; }
  GradcheckOptions& set_rtol(double v) { rtol = v; return *this; }
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0;
  std::string message;  // the first mismatches: input, element, numeric vs analytic
  explicit operator bool() const { return ok; }
};

/// Compares the tape's gradients of fn with central finite differences.
/// The output is projected on a fixed random tensor R (L = sum(R * fn(x))), so every output
/// element and its gradient path is exercised, not just their sum. Checks every input that
/// requires a gradient; the inputs' values are restored afterwards.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = GradcheckOptions());

}  // namespace tg
