#include "common/run_log.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <vector>

#include "tapegrad/error.h"

namespace ex {

namespace fs = std::filesystem;

std::string sibling_path(const std::string& path, const std::string& extension) {
  return fs::path(path).replace_extension(extension).string();
}

void make_parent_dirs(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw tg::IOError("cannot create directory " + parent.string() + ": " + ec.message());
}

static const char* kHeader = "step,loss,lr,accuracy";

CsvLog::CsvLog(const std::string& path, int64_t resume_step) : path_(path) {
  std::vector<std::string> kept;
  if (resume_step >= 0) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      if (line == kHeader || line.empty()) continue;
      if (std::strtoll(line.c_str(), nullptr, 10) <= resume_step) kept.push_back(line);
    }
  }
  make_parent_dirs(path);
  out_.open(path, std::ios::trunc);
  if (!out_) throw tg::IOError("cannot write " + path + ": " + std::strerror(errno));
  out_ << kHeader << "\n";
  for (const auto& line : kept) out_ << line << "\n";
  out_.flush();
}

void CsvLog::add(int64_t step, double loss, double lr, double accuracy) {
  char row[160];
  if (std::isnan(accuracy))
    std::snprintf(row, sizeof row, "%lld,%.6g,%.6g,\n", static_cast<long long>(step), loss, lr);
  else
    std::snprintf(row, sizeof row, "%lld,%.6g,%.6g,%.6g\n", static_cast<long long>(step), loss, lr,
                  accuracy);
  out_ << row;
  out_.flush();
  if (!out_) throw tg::IOError("cannot write " + path_);
}

/// The full path of an executable found on PATH, or "".
static std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

/// 'text' for a gnuplot string or a shell word: single quotes, with ' written as ''/'\''.
static std::string quoted(const std::string& s, bool shell) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? (shell ? "'\\''" : "''") : std::string(1, c);
  return out + "'";
}

bool plot_loss_curve(const std::string& csv, const std::string& png, const std::string& title,
                     const std::string& accuracy_label) {
  const std::string gnuplot = find_on_path("gnuplot");
  if (gnuplot.empty()) {
    std::printf("note: gnuplot not found, so no loss-curve PNG (install gnuplot-nox); the curve "
                "is in %s\n", csv.c_str());
    return false;
  }
  bool has_accuracy = false;
  int rows = 0;
  {
    std::ifstream in(csv);
    std::string line;
    while (std::getline(in, line)) {
      if (line == kHeader || line.empty()) continue;
      ++rows;
      if (line.back() != ',') has_accuracy = true;
    }
  }
  if (rows < 2) {
    std::printf("note: %s has %d row%s, too few for a loss-curve PNG\n", csv.c_str(), rows,
                rows == 1 ? "" : "s");
    return false;
  }
  const std::string script_path = png + ".gp";
  {
    std::ofstream gp(script_path, std::ios::trunc);
    gp << "set terminal pngcairo size 800,450 font 'sans,10'\n"
       << "set output " << quoted(png, false) << "\n"
       << "set datafile separator comma\n"
       << "set key autotitle columnhead top center horizontal\n"
       << "set title " << quoted(title, false) << " noenhanced\n"
       << "set xlabel 'step'\nset ylabel 'training loss'\nset grid\n"
       << "set ytics nomirror\n";
    if (has_accuracy)
      gp << "set y2label 'accuracy (%)'\nset y2tics\nset y2range [0:100]\n"
         << "plot " << quoted(csv, false) << " using 1:2 with lines lw 2 title 'training loss', "
         << "'' using 1:($4*100) axes x1y2 with lines lw 2 title " << quoted(accuracy_label, false) << "\n";
    else
      gp << "plot " << quoted(csv, false) << " using 1:2 with lines lw 2 title 'training loss'\n";
    if (!gp) {
      std::printf("note: cannot write %s, so no loss-curve PNG\n", script_path.c_str());
      return false;
    }
  }
  const std::string command =
      quoted(gnuplot, true) + " " + quoted(script_path, true) + " 2>&1";
  const int rc = std::system(command.c_str());
  std::remove(script_path.c_str());
  if (rc != 0) {
    std::printf("note: gnuplot failed (status %d), so no loss-curve PNG\n", rc);
    return false;
  }
  return true;
}

}  // namespace ex
