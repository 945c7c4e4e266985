#include "common/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ex {

bool stdout_is_terminal() {
  if (!isatty(fileno(stdout))) return false;
  const char* term = std::getenv("TERM");
  return term == nullptr || std::strcmp(term, "dumb") != 0;
}

ProgressBar::ProgressBar(std::string label, int64_t total)
    : label_(std::move(label)), total_(std::max<int64_t>(total, 1)), tty_(stdout_is_terminal()) {}

void ProgressBar::update(int64_t done, const std::string& status) {
  if (!tty_) return;
  const double now = watch_.seconds();
  if (done < total_ && last_draw_ >= 0 && now - last_draw_ < 0.1) return;
  last_draw_ = now;
  constexpr int kWidth = 20;
  const int64_t filled = std::clamp<int64_t>(done * kWidth / total_, 0, kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  // \r back to the start of the line, \x1b[K clears what a longer earlier line left.
  std::printf("\r%s [%s] %5lld/%lld  %s  %.1fs\x1b[K", label_.c_str(), bar.c_str(),
              static_cast<long long>(done), static_cast<long long>(total_), status.c_str(), now);
  std::fflush(stdout);
}

void ProgressBar::finish(const std::string& summary) {
  if (tty_)
    std::printf("\r%s  %s\x1b[K\n", label_.c_str(), summary.c_str());
  else
    std::printf("%s  %s\n", label_.c_str(), summary.c_str());
  std::fflush(stdout);
}

}  // namespace ex
