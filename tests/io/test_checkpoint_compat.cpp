// Compatibility: tests/fixtures/checkpoint/v1.ckpt was written once, in format version 1, and
// must load with the same values forever. The values follow a formula (not the RNG), so
// they are checked independently of how the file was made.
//
// To (re)create the fixtures (only when deliberately introducing them; a format change must
// bump the version and keep reading v1.ckpt):
//   TAPEGRAD_WRITE_FIXTURES=1 build/tests/test_io_checkpoint_compat --gtest_filter=*WriteFixtures
#include <gtest/gtest.h>

#include <cstdlib>

#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;
using test_util::read_file;
using test_util::write_file;

namespace {

const std::string kDir = std::string(TAPEGRAD_TEST_DATA) + "/checkpoint/";

/// Element i of model entry e: exact in float32.
float value(size_t e, size_t i) { return static_cast<float>(int((i * 7 + e * 3) % 19) - 9) / 4.0f; }

struct Compat : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  Compat() : Module("Compat") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(3, 4));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(nn::LinearOptions(4, 2).bias(false)));
    register_buffer("scale", scalar(0));
    register_buffer("empty", zeros({0, 3}));
  }
};

const std::vector<std::string> kKeys = {"fc1.weight", "fc1.bias", "fc2.weight", "scale", "empty"};

Checkpoint fixture_checkpoint() {
  Compat m;
  size_t e = 0;
  for (auto& [name, t] : m.named_state()) {
    auto d = t.data();
    for (int64_t i = 0; i < d.size(); ++i) d[i] = value(e, static_cast<size_t>(i));
    ++e;
  }
  Checkpoint ck;
  ck.set_model(m);
  ck.step = 1234;
  ck.epoch = 5;
  ck.rng = {1, 2, 3, 0xFFFFFFFFFFFFFFFFull};
  ck.metadata["d_model"] = "4";
  ck.metadata["name"] = "compat ✓";
  StateDict opt;
  opt.tensors["state.0.momentum_buffer"] = tensor({{0.5f, -1, 2}, {0, 0.25f, 8}, {1, 1, 1}, {-3, 4, 0.125f}});
  opt.numbers["param_groups.0.lr"] = 0.1;
  opt.numbers["state.0.step"] = 3;
  opt.strings["type"] = "SGD";
  ck.set("optimizer", opt);
  StateDict data;
  data.numbers["position"] = 96;
  ck.set("data", data);
  return ck;
}

}  // namespace

TEST(CheckpointCompat, WriteFixtures) {
  if (!std::getenv("TAPEGRAD_WRITE_FIXTURES")) GTEST_SKIP() << "set TAPEGRAD_WRITE_FIXTURES=1 to write";
  fixture_checkpoint().save(kDir + "v1.ckpt");
  const std::string good = read_file(kDir + "v1.ckpt");
  std::string bad = good;
  bad[good.size() / 2] ^= 0x04;  // one payload bit: the CRC must catch it
  write_file(kDir + "v1_bad_crc.ckpt", bad);
  write_file(kDir + "v1_truncated.ckpt", good.substr(0, 100));
}

TEST(CheckpointCompat, Version1FileLoadsWithItsValues) {
  const Checkpoint ck = Checkpoint::load(kDir + "v1.ckpt");
  EXPECT_EQ(ck.step, 1234);
  EXPECT_EQ(ck.epoch, 5);
  EXPECT_EQ(ck.rng, (Generator::State{1, 2, 3, 0xFFFFFFFFFFFFFFFFull}));
  EXPECT_EQ(ck.metadata, (std::map<std::string, std::string>{{"d_model", "4"}, {"name", "compat ✓"}}));
  ASSERT_EQ(ck.model.size(), kKeys.size());
  const std::vector<Shape> shapes = {{4, 3}, {4}, {2, 4}, {}, {0, 3}};
  for (size_t e = 0; e < kKeys.size(); ++e) {
    EXPECT_EQ(ck.model[e].first, kKeys[e]);
    EXPECT_EQ(ck.model[e].second.shape(), shapes[e]) << kKeys[e];
    const auto v = ck.model[e].second.to_vector();
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], value(e, i)) << kKeys[e] << "[" << i << "]";
  }
  const StateDict& opt = ck.get("optimizer");
  EXPECT_EQ(opt.tensor_at("state.0.momentum_buffer", "t").to_vector(),
            (std::vector<float>{0.5f, -1, 2, 0, 0.25f, 8, 1, 1, 1, -3, 4, 0.125f}));
  EXPECT_EQ(opt.tensor_at("state.0.momentum_buffer", "t").shape(), (Shape{4, 3}));
  EXPECT_EQ(opt.number_at("param_groups.0.lr", "t"), 0.1);
  EXPECT_EQ(opt.number_at("state.0.step", "t"), 3);
  EXPECT_EQ(opt.string_at("type", "t"), "SGD");
  EXPECT_EQ(ck.get("data").number_at("position", "t"), 96);

  // tg::load reads the same file into the module.
  Compat m;
  EXPECT_TRUE(load(m, kDir + "v1.ckpt").ok());
  EXPECT_EQ(m.fc2->weight.to_vector()[5], value(2, 5));
  EXPECT_EQ(m.find("scale").item(), value(3, 0));
}

TEST(CheckpointCompat, TodaysWriterProducesTheSameBytes) {
  // If this fails, the writer changed the version-1 encoding: bump the format version
  // instead, and keep the reader of version 1.
  const std::string file = read_file(kDir + "v1.ckpt");
  ASSERT_GT(file.size(), 32u);
  EXPECT_EQ(file.substr(32), fixture_checkpoint().serialize());
}

TEST(CheckpointCompat, DamagedFixturesAreRefused) {
  EXPECT_THROW(Checkpoint::load(kDir + "v1_bad_crc.ckpt"), CheckpointError);
  EXPECT_THROW(Checkpoint::load(kDir + "v1_truncated.ckpt"), CheckpointError);
}
