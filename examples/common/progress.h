#pragma once
// Progress display for training loops, and a wall-clock stopwatch.
//
// On a terminal the bar redraws in place (at most 10 times a second):
//   epoch  3/12 [##########..........]  275/550  loss 1.2345  acc 55.1%  1.2s
// When stdout is piped or redirected, nothing is drawn while the epoch runs and finish()
// prints one plain line per epoch, so logs stay readable.
#include <chrono>
#include <cstdint>
#include <string>

namespace ex {

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void reset() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

/// True if stdout is a terminal that can redraw a line (not TERM=dumb).
bool stdout_is_terminal();

class ProgressBar {
 public:
  /// `label` starts the line ("epoch  3/12"); `total` is the number of steps in the bar.
  ProgressBar(std::string label, int64_t total);
  /// `done` steps of `total` are finished; `status` follows the bar ("loss 1.23  acc 45%").
  void update(int64_t done, const std::string& status);
  /// Ends the bar: on a terminal the line is replaced by `label  summary`, when piped that
  /// line is printed. Either way it ends with a newline.
  void finish(const std::string& summary);

 private:
  std::string label_;
  int64_t total_;
  bool tty_;
  Stopwatch watch_;
  double last_draw_ = -1.0;
};

}  // namespace ex
