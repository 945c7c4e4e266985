#pragma once
// The command line every example shares (CLI11), and a main() wrapper that turns every error
// into a message and a non-zero exit.
//
//   ex::RunOptions run;                      // --lr --seed --threads --checkpoint --device --data
//   CLI::App app{"What this example does"};
//   app.add_option("--epochs", epochs, "...");
//   ex::add_run_options(app, run, {lr, "checkpoints/name.ckpt", ex::words_dir()});
//   return ex::run_main(app, argc, argv, [&] { ex::apply_run_options(run); ...; return 0; });
#include <cstdint>
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace ex {

/// The options shared by every example; each example adds its own (--epochs or --steps, ...).
struct RunOptions {
  double lr = 1e-3;
  uint64_t seed = 0;
  int threads = 1;
  std::string checkpoint;    // where the run's checkpoint goes; its CSV and PNG sit beside it
  std::string device = "cpu";  // cpu | cuda | auto
  std::string data;          // the dataset directory (or file)
};

/// CLI11 checks that refuse NaN and infinities (CLI11's own PositiveNumber lets "nan" through).
extern const CLI::Validator kFinitePositive;
extern const CLI::Validator kFiniteNonNegative;

/// Adds --lr, --seed, --threads, --checkpoint, --device and --data to `app`, with the
/// defaults already in `options`. `data_help` says what --data points at.
void add_run_options(CLI::App& app, RunOptions& options,
                     const std::string& data_help = "dataset directory");

/// Adds --d-model, --layers, --heads and --d-ff (each from 1 to 10^9): a transformer's size.
void add_transformer_options(CLI::App& app, int64_t& d_model, int64_t& n_layers, int64_t& n_heads,
                             int64_t& d_ff);

/// Seeds the global generator, sets the thread count and the GEMM device.
void apply_run_options(const RunOptions& options);

/// The shipped words dataset (datasets/words of the source tree this was built from).
std::string words_dir();

/// Parses the command line and runs `body`. --help prints and returns 0; a bad argument
/// prints CLI11's message and returns its non-zero code; a tg::Error or std::exception from
/// `body` prints "<program>: error: <what>" to stderr and returns 1.
int run_main(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

}  // namespace ex
