// Damaged checkpoints and npz files: truncated at every offset, every byte flipped, and
// payloads corrupted behind a recomputed CRC (so the parser itself sees garbage). Every
// load must either succeed with identical data or throw tg::CheckpointError: never crash,
// never another exception, never a huge allocation.
#include <gtest/gtest.h>

#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;
using test_util::read_file;
using test_util::set_le;
using test_util::write_file;

namespace {

std::string tmp_path(const std::string& name) {
  static const test_util::ScratchDir dir("tg_damage");
  return dir.path(name);
}
/// Recomputes both CRCs, so that a corrupted payload reaches the parser.
std::string with_fixed_crcs(std::string s) {
  if (s.size() < 32) return s;
  set_le(s, 24, crc32(s.data() + 32, s.size() - 32), 4);
  set_le(s, 28, crc32(s.data(), 28), 4);
  return s;
}

/// A small checkpoint with every kind of field: a few hundred bytes.
Checkpoint small_checkpoint() {
  Checkpoint ck;
  ck.step = 42;
  ck.epoch = 3;
  ck.rng = {11, 22, 33, 44};
  ck.metadata["d_model"] = "8";
  ck.model.emplace_back("fc.weight", tensor({{1, 2, 3}, {4, 5, 6}}));
  ck.model.emplace_back("fc.bias", tensor({0.5f, -0.5f}));
  ck.model.emplace_back("s", scalar(7));
  StateDict opt;
  opt.tensors["state.0.exp_avg"] = tensor({0.25f, 0.75f});
  opt.numbers["step"] = 5;
  opt.strings["type"] = "AdamW";
  ck.set("optimizer", opt);
  return ck;
}

enum class Outcome { kSame, kDifferent, kError };

/// Loads `bytes`; anything but success or tg::CheckpointError fails the test.
Outcome load_checkpoint(const std::string& bytes, const std::string& expected_payload,
                        const std::string& what) {
  const auto p = tmp_path("fuzz.ckpt");
  write_file(p, bytes);
  try {
    const Checkpoint ck = Checkpoint::load(p);
    return ck.serialize() == expected_payload ? Outcome::kSame : Outcome::kDifferent;
  } catch (const CheckpointError&) {
    return Outcome::kError;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << typeid(e).name() << ": " << e.what();
  } catch (...) {
    ADD_FAILURE() << what << ": unknown exception";
  }
  return Outcome::kError;
}

}  // namespace

TEST(CheckpointDamage, TruncatedAtEveryOffset) {
  const auto path = tmp_path("good.ckpt");
  small_checkpoint().save(path);
  const std::string good = read_file(path), payload = good.substr(32);
  ASSERT_LT(good.size(), 1000u);
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_EQ(load_checkpoint(good.substr(0, n), payload, "truncated to " + std::to_string(n)),
              Outcome::kError) << n;
  EXPECT_EQ(load_checkpoint(good, payload, "intact"), Outcome::kSame);
  // Truncated payloads with a header rewritten to match still fail cleanly in the parser.
  for (size_t n = 33; n < good.size(); ++n) {
    std::string s = good.substr(0, n);
    set_le(s, 16, n - 32, 8);
    EXPECT_EQ(load_checkpoint(with_fixed_crcs(s), payload, "cut payload " + std::to_string(n)),
              Outcome::kError) << n;
  }
}

TEST(CheckpointDamage, EveryByteFlipped) {
  const auto path = tmp_path("good.ckpt");
  small_checkpoint().save(path);
  const std::string good = read_file(path), payload = good.substr(32);
  int errors = 0;
  for (size_t i = 0; i < good.size(); ++i)
    for (unsigned char mask : {0x01, 0x80, 0xFF}) {
      std::string s = good;
      s[i] = static_cast<char>(s[i] ^ mask);
      const Outcome o = load_checkpoint(s, payload, "flip byte " + std::to_string(i));
      EXPECT_NE(o, Outcome::kDifferent) << "byte " << i << " mask " << int(mask)
                                        << " loaded wrong data silently";
      errors += o == Outcome::kError;
    }
  EXPECT_EQ(errors, static_cast<int>(3 * good.size()));  // the CRCs catch every single flip
}

TEST(CheckpointDamage, GarbageBehindAValidCrcNeverCrashes) {
  const auto path = tmp_path("good.ckpt");
  small_checkpoint().save(path);
  const std::string good = read_file(path), payload = good.substr(32);
  int errors = 0, loads = 0;
  for (size_t i = 32; i < good.size(); ++i)
    for (unsigned char v : {0x00, 0x01, 0x7F, 0x80, 0xFF}) {
      std::string s = good;
      s[i] = static_cast<char>(v);
      const Outcome o = load_checkpoint(with_fixed_crcs(s), payload, "byte " + std::to_string(i));
      (o == Outcome::kError ? errors : loads)++;
    }
  // Float bytes can change without harm to the structure; length and count bytes cannot.
  EXPECT_GT(errors, 0);
  EXPECT_GT(loads, 0);
}

TEST(CheckpointDamage, HugeDeclaredSizesAreRefusedBeforeAllocating) {
  const std::string payload = small_checkpoint().serialize();
  // Offsets in the payload (see the spec in checkpoint.h): 1 byte-order, 8 step, 8 epoch,
  // 32 rng, then the metadata count at 49 and the first key's length at 57.
  auto expect = [&](size_t at, uint64_t value, int bytes, const std::string& needle) {
    std::string s = payload;
    set_le(s, at, value, bytes);
    try {
      Checkpoint::deserialize(s, "test");
      ADD_FAILURE() << "expected CheckpointError containing '" << needle << "'";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect(49, ~uint64_t(0), 8, "metadata count 18446744073709551615 cannot fit");
  expect(49, uint64_t(1) << 40, 8, "cannot fit");
  expect(57, uint64_t(1) << 62, 8, "key length 4611686018427387904 exceeds");
  // The first model entry: after the metadata (8 + "d_model" + 8 + "8") and the count.
  const size_t model_count = 57 + 8 + 7 + 8 + 1;
  expect(model_count, uint64_t(1) << 50, 8, "model entry count");
  const size_t name_len = model_count + 8, rank = name_len + 8 + 9;
  expect(name_len, uint64_t(1) << 33, 8, "entry name length");
  expect(rank, 1000, 4, "has rank 1000");
  expect(rank + 4, uint64_t(1) << 39, 8, "does not fit");     // dims [2^39, 3]
  expect(rank + 4, uint64_t(-5), 8, "has dimension -5");
  expect(0, 0, 1, "byte-order flag is 0");
  EXPECT_THROW(Checkpoint::deserialize("", "test"), CheckpointError);
  EXPECT_THROW(Checkpoint::deserialize(payload + "z", "test"), CheckpointError);
}

TEST(NpzDamage, TruncatedAndFlippedAtEveryOffset) {
  const auto path = tmp_path("good.npz");
  write_npz(path, {{"fc.weight", tensor({{1, 2}, {3, 4}})}, {"fc.bias", tensor({5, 6})},
                   {"s", scalar(1)}});
  const std::string good = read_file(path);
  const auto reference = read_npz(path);
  auto outcome = [&](const std::string& bytes, const std::string& what) {
    const auto p = tmp_path("fuzz.npz");
    write_file(p, bytes);
    try {
      const auto got = read_npz(p);
      if (got.size() != reference.size()) return Outcome::kDifferent;
      for (size_t i = 0; i < got.size(); ++i)
        if (got[i].first != reference[i].first || got[i].second.shape() != reference[i].second.shape() ||
            got[i].second.to_vector() != reference[i].second.to_vector())
          return Outcome::kDifferent;
      return Outcome::kSame;
    } catch (const CheckpointError&) {
      return Outcome::kError;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": " << e.what();
    }
    return Outcome::kError;
  };
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_EQ(outcome(good.substr(0, n), "cut " + std::to_string(n)), Outcome::kError) << n;
  for (size_t i = 0; i < good.size(); ++i)
    for (unsigned char mask : {0x01, 0x80, 0xFF}) {
      std::string s = good;
      s[i] = static_cast<char>(s[i] ^ mask);
      // Some zip fields are informational (time, "version made by"): those loads are identical.
      EXPECT_NE(outcome(s, "flip " + std::to_string(i)), Outcome::kDifferent) << "byte " << i;
    }
}
