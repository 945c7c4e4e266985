#include "common/cli.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>

#include "tapegrad/device.h"
#include "tapegrad/error.h"
#include "tapegrad/random.h"

namespace ex {

const CLI::Validator kFinitePositive(
    [](std::string& s) -> std::string {
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      return end != s.c_str() && *end == 0 && std::isfinite(v) && v > 0 ? "" : "expected a finite number > 0, got '" + s + "'";
    },
    "POSITIVE");

const CLI::Validator kFiniteNonNegative(
    [](std::string& s) -> std::string {
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      return end != s.c_str() && *end == 0 && std::isfinite(v) && v >= 0 ? "" : "expected a finite number >= 0, got '" + s + "'";
    },
    "NONNEGATIVE");

namespace {
const CLI::Validator kUnsigned(
    [](std::string& s) -> std::string {
      return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos
                 ? ""
                 : "expected a whole number >= 0, got '" + s + "'";
    },
    "UINT");

/// Where a checkpoint can go: not a directory (nor a name ending in '/'), not a FIFO or a
/// device, and not under something that is not a directory. Checked before any training.
const CLI::Validator kCheckpointPath(
    [](std::string& s) -> std::string {
      namespace fs = std::filesystem;
      if (s.empty()) return "the checkpoint path is empty";
      if (s.back() == '/') return "'" + s + "' names a directory; give a file path inside it";
      std::error_code ec;
      const auto st = fs::status(s, ec);
      if (fs::is_directory(st)) return "'" + s + "' is a directory; give a file path inside it";
      if (fs::exists(st) && !fs::is_regular_file(st)) return "'" + s + "' exists and is not a regular file";
      for (fs::path p = fs::path(s).parent_path(); !p.empty(); p = p.parent_path()) {
        const auto ps = fs::status(p, ec);
        if (fs::exists(ps)) {
          if (!fs::is_directory(ps)) return "'" + p.string() + "' is not a directory";
          break;
        }
        if (p == p.parent_path()) break;
      }
      return "";
    },
    "FILE");
}  // namespace

void add_run_options(CLI::App& app, RunOptions& o, const std::string& data_help) {
  app.add_option("--lr", o.lr, "learning rate")->capture_default_str()->check(kFinitePositive);
  app.add_option("--seed", o.seed, "random seed (initial weights, shuffling)")
      ->capture_default_str()
      ->check(kUnsigned);
  app.add_option("--threads", o.threads, "CPU threads for matrix products")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--checkpoint", o.checkpoint,
                 "checkpoint file; the run's CSV and loss-curve PNG are written beside it")
      ->capture_default_str()
      ->check(kCheckpointPath);
  app.add_option("--device", o.device, "where matrix products run")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--data", o.data, data_help)->capture_default_str();
}

void add_transformer_options(CLI::App& app, int64_t& d_model, int64_t& n_layers, int64_t& n_heads,
                             int64_t& d_ff) {
  const auto positive = CLI::Range(int64_t{1}, int64_t{1000000000});
  app.add_option("--d-model", d_model, "embedding width")->check(positive)->capture_default_str();
  app.add_option("--layers", n_layers, "transformer blocks")->check(positive)->capture_default_str();
  app.add_option("--heads", n_heads, "attention heads")->check(positive)->capture_default_str();
  app.add_option("--d-ff", d_ff, "feed-forward width")->check(positive)->capture_default_str();
}

void apply_run_options(const RunOptions& o) {
  tg::manual_seed(o.seed);
  tg::set_num_threads(o.threads);
  tg::set_device(o.device == "cuda"   ? tg::Device::CUDA
                 : o.device == "auto" ? tg::Device::Auto
                                      : tg::Device::CPU);
}

std::string words_dir() { return TAPEGRAD_EXAMPLES_SOURCE_DIR "/datasets/words"; }

int run_main(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // prints help (rc 0) or the error and a hint (rc != 0)
  }
  const std::string program =
      app.get_name().empty() ? "example" : std::filesystem::path(app.get_name()).filename().string();
  try {
    return body();
  } catch (const tg::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
  }
  return 1;
}

}  // namespace ex
