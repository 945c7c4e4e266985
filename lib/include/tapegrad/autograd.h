#pragma once
// Controls for the tape: turning recording off, and checking gradients numerically.
#include <functional>
#include <string>
#include <vector>

#include "tapegrad/arg.h"
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

// ---- anomaly detection ------------------------------------------------------------------

/// Turns anomaly detection on or off for the whole process (off by default). While it is on,
/// every op scans its output after its forward, and every backward closure scans each gradient
/// it gives; the first NaN or Inf throws tg::AnomalyError naming the op, the module whose
/// forward recorded it (when known) and the shapes. A forward is flagged for any NaN, and for
/// an Inf only when its inputs were finite (masked_fill writing -inf is not flagged). It costs
/// a scan of every value: for debugging, not for production runs.
void detect_anomaly(bool on);
bool is_anomaly_enabled();

/// RAII: anomaly detection on (or off) inside its scope.
class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool on = true) : prev_(is_anomaly_enabled()) { detect_anomaly(on); }
  ~DetectAnomalyGuard() { detect_anomaly(prev_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

/// RAII: names the module whose forward runs on this thread, so that anomaly reports can say
/// where an op was recorded ("blocks.0.attn.q_proj (Linear 64→64)"); the innermost scope
/// wins. `path` is the text the report prints. The library's modules open one in forward
/// through nn::Module::scope(), which builds the text only while anomaly detection is on; a
/// module of your own can do the same (`auto scope = this->scope();`). An empty path, or
/// anomaly detection off, opens nothing.
class ModuleScope {
 public:
  explicit ModuleScope(const std::string& path);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  bool active_;
};

/// The innermost module scope open on this thread ("" if none, or anomaly detection is off).
std::string current_module();

// ---- ops of your own -------------------------------------------------------------------------

/// The backward of a custom op: given dL/d(output) (the output's shape), returns dL/d(input i)
/// for every input, in order; an undefined tensor means "no gradient". A gradient may have the
/// broadcast shape of its input (the engine sums it down).
using CustomBackward = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

/// Records an op of your own on the tape: `value` is its forward result (computed however you
/// like, e.g. under NoGradGuard), `inputs` the tensors it depends on, `backward` its gradient.
/// Returns a new tensor holding `value`'s data that backpropagates through `backward` (when
/// grad mode is on and an input requires a gradient). Check it with tg::gradcheck.
///
///   Tensor cube(const Tensor& x) {        // y = x³    dx = g · 3x²
///     Tensor y;
///     { NoGradGuard ng; y = x * x * x; }
///     return custom_op("cube", y, {x}, [x](const Tensor& g) {
///       return std::vector<Tensor>{g * 3.0f * x * x};
///     });
///   }
///
/// The backward runs inside the engine's replay with recording off. It may throw: the replay
/// stops, the exception reaches backward()'s caller, and the next forward/backward works.
Tensor custom_op(const std::string& name, const Tensor& value, const std::vector<Tensor>& inputs,
                 CustomBackward backward);

// ---- gradient checks -------------------------------------------------------------------------

struct GradcheckOptions {
  /// The central-difference step (float32 data).
  TG_ARG(double, eps) = 1e-3;
  /// An element passes if |numeric - analytic| <= atol + rtol * |numeric|.
  TG_ARG(double, atol) = 1e-3;
  TG_ARG(double, rtol) = 1e-2;
  /// Seeds the random projection of the output.
  TG_ARG(uint64_t, seed) = 1234;
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
