// Replays the committed fuzz corpus (fuzz/corpus/<target>/: the seeds, and every input that
// ever crashed a fuzzer) through the same entry points as the libFuzzer harnesses
// (fuzz/targets.h), built with the ordinary compiler: each input must end in success or a
// tg::Error, never a crash, another exception or (in the sanitizer build) a memory error.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "targets.h"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> inputs(const std::string& target) {
  std::vector<fs::path> out;
  const fs::path dir = fs::path(TAPEGRAD_SOURCE_DIR) / "fuzz" / "corpus" / target;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

void replay(const std::string& target, int (*fn)(const uint8_t*, size_t)) {
  const auto files = inputs(target);
  ASSERT_FALSE(files.empty()) << "no corpus for " << target;
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      ADD_FAILURE() << "escaped: " << e.what();
    }
  }
  std::printf("[fuzz regressions] %s: %zu inputs replayed\n", target.c_str(), files.size());
}

}  // namespace

TEST(FuzzRegressions, Checkpoint) { replay("checkpoint", fuzz::checkpoint_target); }
TEST(FuzzRegressions, Npz) { replay("npz", fuzz::npz_target); }
TEST(FuzzRegressions, Words) { replay("words", fuzz::words_target); }
TEST(FuzzRegressions, Points) { replay("points", fuzz::points_target); }
TEST(FuzzRegressions, Inspect) { replay("inspect", fuzz::inspect_target); }
