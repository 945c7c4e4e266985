#pragma once
// Small helpers the tests share: a scratch folder per test program, whole files as bytes,
// little-endian fields of a file format, and random inputs for gradient checks.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tapegrad/tapegrad.h"

namespace test_util {

/// A folder for one test program's files, <gtest TempDir><prefix>_<pid>, deleted with
/// everything in it when this object is destroyed. Hold it in a function-local static:
///   std::string tmp_path(const std::string& name) {
///     static const test_util::ScratchDir dir("tg_npz");
///     return dir.path(name);
///   }
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix)
      : dir_(::testing::TempDir() + prefix + "_" + std::to_string(::getpid())) {
    ::mkdir(dir_.c_str(), 0755);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

/// The whole file as bytes ("" if it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Replaces the file with `bytes`.
inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// The unsigned little-endian integer of `bytes` bytes at s[at].
inline uint64_t get_le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

/// Writes v as `bytes` little-endian bytes at s[at].
inline void set_le(std::string& s, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

/// Uniform values in [lo, hi) from the global generator, moved away from 0 (|x| >= 0.1, past
/// the kinks of abs/relu/max), requiring a gradient.
inline tg::Tensor random_input(const tg::Shape& s, float lo, float hi) {
  tg::Tensor t = tg::rand(s);
  for (float& v : t.data()) {
    v = lo + (hi - lo) * v;
    if (std::abs(v) < 0.1f) v += v < 0 ? -0.1f : 0.1f;
  }
  return t.requires_grad_();
}

/// Same shape and the same float bits everywhere (NaN included).
inline ::testing::AssertionResult same_bits(const tg::Tensor& a, const tg::Tensor& e) {
  if (!a.defined() || !e.defined()) return ::testing::AssertionFailure() << "undefined tensor";
  if (a.shape() != e.shape())
    return ::testing::AssertionFailure() << tg::to_string(a.shape()) << " vs " << tg::to_string(e.shape());
  const auto va = a.to_vector(), ve = e.to_vector();
  for (size_t i = 0; i < va.size(); ++i)
    if (std::memcmp(&va[i], &ve[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << va[i] << " vs " << ve[i];
  return ::testing::AssertionSuccess();
}

/// Expects f() to throw E (or a subclass) whose message holds every one of `parts`.
template <class E, class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << p << "' not in: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

}  // namespace test_util
