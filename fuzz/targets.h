#pragma once
// The fuzzed entry points, shared by the libFuzzer harnesses (fuzz/fuzz_*.cpp, clang) and
// the ctest replay of the committed corpus (tests/io/test_fuzz_regressions.cpp, g++).
//
// Each target takes arbitrary bytes, feeds them to a loader the way a user's file would reach
// it, and then uses whatever loaded. A tg::Error is the expected outcome of bad bytes; any
// other exception escapes (libFuzzer reports it as a crash, the replay test as a failure),
// and so does every sanitizer report, leak and hang.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tapegrad/checkpoint.h"
#include "tapegrad/npz.h"
#include "tapegrad/tapegrad.h"

#include "inspect.h"        // tools: what tapegrad-inspect does with a file
#include "common/points.h"  // examples/common: the points CSV loader (linear_basics --data)
#include "common/words.h"   // examples/common: the words-by-language TSV loader

namespace fuzz {

/// A scratch file per process (and per name), in $TMPDIR or /tmp, removed at exit.
inline std::string scratch_path(const std::string& name) {
  struct Cleanup {
    std::vector<std::string> paths;
    ~Cleanup() {
      std::error_code ec;
      for (const auto& p : paths) std::filesystem::remove_all(p, ec);
    }
  };
  static Cleanup cleanup;
  const char* dir = std::getenv("TMPDIR");
  std::string path =
      std::string(dir && *dir ? dir : "/tmp") + "/tg_fuzz_" + std::to_string(::getpid()) + "_" + name;
  cleanup.paths.push_back(path);
  return path;
}

inline void write_bytes(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

/// The model every loaded state is restored into: keys fc1.weight [4, 3], fc1.bias [4],
/// fc2.weight [2, 4], fc2.bias [2], and the buffer scale [2].
struct Net : tg::nn::Module {
  std::shared_ptr<tg::nn::Linear> fc1, fc2;
  Net() : Module("Net") {
    fc1 = register_module("fc1", std::make_shared<tg::nn::Linear>(3, 4));
    fc2 = register_module("fc2", std::make_shared<tg::nn::Linear>(4, 2));
    register_buffer("scale", tg::full({2}, 0.5f));
  }
};

/// Uses a loaded checkpoint as a training program would: restores the model (strict, then
/// not), the optimizers, a scheduler and a data loader from its named states.
inline void use_checkpoint(const tg::Checkpoint& ck) {
  auto swallow = [](auto&& fn) {
    try {
      fn();
    } catch (const tg::Error&) {
    }
  };
  Net net;
  swallow([&] { ck.restore_model(net); });
  swallow([&] { ck.restore_model(net, tg::LoadOptions().strict(false)); });
  swallow([&] { (void)ck.get("missing"); });
  for (const auto& [name, state] : ck.states) {
    (void)name;
    swallow([&, &state = state] {
      tg::optim::SGD sgd(net.parameters(), tg::optim::SGDOptions(0.1).momentum(0.9));
      sgd.load_state_dict(state);
    });
    swallow([&, &state = state] {
      tg::optim::Adam adam(net.parameters());
      adam.load_state_dict(state);
      // A loaded state must be usable: one step.
      for (auto& p : net.parameters()) p.set_grad(tg::ones_like(p));
      adam.step();
    });
    swallow([&, &state = state] {
      tg::optim::RMSprop rms(net.parameters(), tg::optim::RMSpropOptions().centered(true).momentum(0.5));
      rms.load_state_dict(state);
    });
    swallow([&, &state = state] {
      tg::optim::SGD sgd(net.parameters(), tg::optim::SGDOptions(0.1));
      tg::optim::WarmupCosineLR sched(sgd, 2, 10);
      sched.load_state_dict(state);
      sched.step();
    });
    swallow([&, &state = state] {
      tg::optim::SGD sgd(net.parameters(), tg::optim::SGDOptions(0.1));
      tg::optim::StepLR sched(sgd, 3);
      sched.load_state_dict(state);
      sched.step();
    });
    swallow([&, &state = state] {
      tg::data::DataLoader<tg::data::TensorDataset> loader(
          tg::data::TensorDataset({tg::zeros({10, 2})}), tg::data::DataLoaderOptions(3).shuffle(true).seed(1));
      loader.load_state_dict(state);
      for (const auto& batch : loader) (void)batch;  // the rest of the resumed epoch
    });
  }
  swallow([&] {
    Net other;
    ck.restore(other, {}, /*restore_rng_state=*/false);
  });
}

/// Checkpoints. The first byte picks how the rest reaches the loader:
///   0: as a payload, through Checkpoint::deserialize;
///   1: as a payload, wrapped in a valid 32-byte header (so the CRCs pass) and read from disk;
///   2: as a whole file, read from disk (header checks, CRCs).
inline int checkpoint_target(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int mode = data[0] % 3;
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  try {
    tg::Checkpoint ck;
    if (mode == 0) {
      ck = tg::Checkpoint::deserialize(std::string(reinterpret_cast<const char*>(body), n), "fuzz");
    } else {
      std::string file;
      if (mode == 1) {
        std::string header = "TAPEGRAD";
        auto put = [&](uint64_t v, int bytes) {
          for (int i = 0; i < bytes; ++i) header.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
        };
        put(1, 4);  // version
        put(0, 4);  // flags
        put(n, 8);  // payload size
        put(tg::crc32(body, n), 4);
        put(tg::crc32(header.data(), header.size()), 4);
        file = header + std::string(reinterpret_cast<const char*>(body), n);
      } else {
        file.assign(reinterpret_cast<const char*>(body), n);
      }
      static const std::string path = scratch_path("ckpt");
      write_bytes(path, reinterpret_cast<const uint8_t*>(file.data()), file.size());
      ck = tg::Checkpoint::load(path);
    }
    use_checkpoint(ck);
    // What loaded must save and load again, to the same bytes.
    const std::string again = tg::Checkpoint::deserialize(ck.serialize()).serialize();
    if (again != ck.serialize()) {
      std::fprintf(stderr, "checkpoint: a loaded checkpoint does not round-trip\n");
      std::abort();
    }
  } catch (const tg::Error&) {
  }
  return 0;
}

/// npz archives, read from disk: read_npz, then import_npz into Net (strict and not).
inline int npz_target(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path("npz");
  write_bytes(path, data, size);
  try {
    const auto arrays = tg::read_npz(path);
    for (const auto& [name, t] : arrays) {
      (void)name;
      (void)t.to_vector();  // every value readable
    }
  } catch (const tg::Error&) {
  }
  Net net;
  try {
    tg::import_npz(net, path);
  } catch (const tg::Error&) {
  }
  try {
    tg::import_npz(net, path, tg::LoadOptions().strict(false));
  } catch (const tg::Error&) {
  }
  return 0;
}

/// The words dataset loader (examples/common/words.h). The input is split at "\n===\n" into
/// languages.txt, train.tsv, val.tsv and test.tsv, written to a scratch folder and loaded
/// (with and without a row limit); then the vocabulary is built and every word encoded. The
/// whole input also goes through utf8_decode and CharVocab::from_utf8.
inline int words_target(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  try {
    const std::u32string text = ex::utf8_decode(in, "fuzz");
    if (ex::utf8_encode(text) != in) {
      std::fprintf(stderr, "words: UTF-8 decode/encode does not round-trip\n");
      std::abort();
    }
    (void)ex::to_lower(text);
  } catch (const tg::Error&) {
  }
  try {
    (void)ex::CharVocab::from_utf8(in);
  } catch (const tg::Error&) {
  }

  static const std::string dir = [] {
    std::string d = scratch_path("words");
    ::mkdir(d.c_str(), 0700);
    return d;
  }();
  const char* names[] = {"languages.txt", "train.tsv", "val.tsv", "test.tsv"};
  size_t pos = 0;
  for (int i = 0; i < 4; ++i) {
    size_t end = in.find("\n===\n", pos);
    if (i == 3 || end == std::string::npos) end = in.size();
    const std::string part = pos <= in.size() ? in.substr(pos, end - pos) : std::string();
    write_bytes(dir + "/" + names[i], reinterpret_cast<const uint8_t*>(part.data()), part.size());
    pos = end == in.size() ? in.size() : end + 5;
  }
  for (int64_t limit : {int64_t{0}, int64_t{2}}) {
    try {
      const ex::WordsData d = ex::load_words(dir, limit);
      ex::CharVocab vocab(d.train.words);
      for (const auto& w : d.train.words) (void)vocab.encode(w);
      for (const auto* split : {&d.val, &d.test})
        for (const auto& w : split->words) {
          try {
            (void)vocab.encode(w);
          } catch (const tg::Error&) {
          }
        }
      for (const auto* split : {&d.train, &d.val, &d.test})
        for (int64_t label : split->labels)
          if (label < 0 || label >= static_cast<int64_t>(d.languages.size())) {
            std::fprintf(stderr, "words: label %lld out of range\n", static_cast<long long>(label));
            std::abort();
          }
      (void)ex::CharVocab::from_utf8(vocab.chars_utf8());
    } catch (const tg::Error&) {
    }
  }
  return 0;
}

/// The points CSV loader of linear_basics --data (examples/common/points.h): whatever loads
/// must be (N, 2) finite coordinates with N >= 4 labels of 0 or 1.
inline int points_target(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path("points.csv");
  write_bytes(path, data, size);
  try {
    const ex::Points p = ex::read_points(path);
    const int64_t n = p.y.numel();
    if (n < 4 || p.x.shape() != tg::Shape{n, 2}) {
      std::fprintf(stderr, "points: %lld labels for x of shape %s\n", static_cast<long long>(n),
                   tg::to_string(p.x.shape()).c_str());
      std::abort();
    }
    for (float v : p.x.to_vector())
      if (!std::isfinite(v)) {
        std::fprintf(stderr, "points: a non-finite coordinate loaded\n");
        std::abort();
      }
    for (int64_t label : p.y.values)
      if (label != 0 && label != 1) {
        std::fprintf(stderr, "points: label %lld loaded\n", static_cast<long long>(label));
        std::abort();
      }
  } catch (const tg::Error&) {
  }
  return 0;
}

/// tapegrad-inspect on the bytes as a file: a checkpoint or an npz, damaged or not. It prints
/// (into a sink here) and returns 0 or 1; nothing else may happen.
inline int inspect_target(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path("inspect.bin");
  write_bytes(path, data, size);
  struct Sink : std::streambuf {
    int overflow(int c) override { return c; }
  } sink;
  std::ostream out(&sink);
  (void)tg_inspect::inspect(path, out, out);
  return 0;
}

}  // namespace fuzz
