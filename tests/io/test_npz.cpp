// numpy interop: .npz files written by tapegrad are read by numpy and back, files written by
// numpy (np.savez) are read by tapegrad, and module import/export is strict like tg::load.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;
using test_util::get_le;
using test_util::read_file;
using test_util::write_file;

namespace {

const std::string kData = std::string(TAPEGRAD_TEST_DATA) + "/checkpoint/";
const std::string kPython = "/usr/bin/python3";

std::string tmp_path(const std::string& name) {
  static const test_util::ScratchDir dir("tg_npz");
  return dir.path(name);
}

/// The formula tests/npz_roundtrip.py checks: ((i*7 + len(key)) % 23 - 11) / 4.
float value(const std::string& key, size_t i) {
  return static_cast<float>(int((i * 7 + key.size()) % 23) - 11) / 4.0f;
}
void fill_formula(const nn::Module& m) {
  for (auto& [key, t] : m.named_state()) {
    auto d = t.data();
    for (int64_t i = 0; i < d.size(); ++i) d[i] = value(key, static_cast<size_t>(i));
  }
}

struct Mlp : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  explicit Mlp(int64_t hidden = 5) : Module("Mlp") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(3, hidden));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, 2));
    register_buffer("running_mean", zeros({2}));
  }
};

std::string shape_arg(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

}  // namespace

TEST(Npz, WriteReadRoundTripIsExact) {
  const std::vector<std::pair<std::string, Tensor>> arrays = {
      {"blocks.0.attn.weight", tensor({{1.5f, -2}, {3, 4}, {5, 6}})},
      {"bias", tensor({0.1f, 0.2f})},
      {"scalar", scalar(-7.25f)},
      {"empty", zeros({0, 4})},
      {"rank3", reshape(arange(0.0f, 24.0f), {2, 3, 4})}};
  const auto path = tmp_path("rt.npz");
  write_npz(path, arrays);
  const auto back = read_npz(path);
  ASSERT_EQ(back.size(), arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    EXPECT_EQ(back[i].first, arrays[i].first);
    EXPECT_EQ(back[i].second.shape(), arrays[i].second.shape());
    EXPECT_EQ(back[i].second.to_vector(), arrays[i].second.to_vector());
  }
  EXPECT_THROW(write_npz(tmp_path("dup.npz"), {{"a", scalar(1)}, {"a", scalar(2)}}), ValueError);
  EXPECT_THROW(write_npz(tmp_path("empty_name.npz"), {{"", scalar(1)}}), ValueError);
}

TEST(Npz, LayoutIsAStoredZipOfAlignedNpy) {
  const auto path = tmp_path("layout.npz");
  write_npz(path, {{"w", tensor({{1, 2, 3}, {4, 5, 6}})}});
  const std::string f = read_file(path);
  EXPECT_EQ(get_le(f, 0, 4), 0x04034b50u);  // local file header
  EXPECT_EQ(get_le(f, 8, 2), 0u);           // method: stored
  EXPECT_EQ(get_le(f, 26, 2), 5u);          // "w.npy"
  EXPECT_EQ(f.substr(30, 5), "w.npy");
  const size_t npy = 35;
  EXPECT_EQ(f.substr(npy, 6), "\x93NUMPY");
  const size_t hlen = get_le(f, npy + 8, 2);
  EXPECT_EQ((10 + hlen) % 64, 0u);  // data aligned as numpy writes it
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  ASSERT_LT(dict.size(), hlen);
  EXPECT_EQ(f.substr(npy + 10, hlen), dict.append(hlen - 1 - dict.size(), ' ') + "\n");
  const size_t size = get_le(f, 22, 4);
  EXPECT_EQ(size, 10 + hlen + 24);
  EXPECT_EQ(get_le(f, 14, 4), crc32(f.data() + npy, size));
  EXPECT_EQ(get_le(f, f.size() - 22, 4), 0x06054b50u);  // end of central directory, no comment
}

TEST(Npz, ReadsWhatNumpyWrites) {
  // Written by tests/npz_roundtrip.py --fixtures with np.savez: C and Fortran order, float64,
  // big-endian, 0-d and empty arrays, zip64 extra fields in the local headers.
  const auto arrays = read_npz(kData + "numpy_savez.npz");
  ASSERT_EQ(arrays.size(), 6u);
  const std::vector<std::pair<std::string, Shape>> want = {
      {"a.weight", {2, 3}}, {"a.fortran", {3, 2}}, {"b.f64", {4}},
      {"c.scalar", {}},     {"d.big", {2, 2}},     {"e.empty", {0, 3}}};
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(arrays[k].first, want[k].first);
    EXPECT_EQ(arrays[k].second.shape(), want[k].second) << want[k].first;
    const auto v = arrays[k].second.to_vector();
    if (want[k].first == "e.empty") continue;
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], value(want[k].first, i)) << want[k].first << i;
  }
  try {
    read_npz(kData + "numpy_compressed.npz");
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("np.savez, not np.savez_compressed"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_npz(kData + "v1.ckpt"), CheckpointError);
  EXPECT_THROW(read_npz(tmp_path("does_not_exist.npz")), IOError);
}

TEST(Npz, RefusesOtherDtypesAndBadHeaders) {
  // Hand-made members: an int64 array, and a header whose shape does not match the data.
  auto make = [&](const std::string& header, size_t data_bytes) {
    std::string npy("\x93NUMPY\x01\x00", 8);
    npy.push_back(static_cast<char>(header.size() & 0xFF));
    npy.push_back(static_cast<char>(header.size() >> 8));
    npy += header + std::string(data_bytes, '\0');
    // Put it in a zip by writing a real npz and swapping the member bytes (same length).
    Tensor t = zeros({static_cast<int64_t>((npy.size() - 128) / 4)});
    const auto path = tmp_path("hand.npz");
    write_npz(path, {{"x", t}});
    std::string f = read_file(path);
    EXPECT_EQ(get_le(f, 22, 4), npy.size());
    f.replace(35, npy.size(), npy);
    const uint32_t c = crc32(npy.data(), npy.size());
    for (size_t at : {size_t(14), f.size() - 22 - 51 + 16})
      for (int i = 0; i < 4; ++i) f[at + i] = static_cast<char>((c >> (8 * i)) & 0xFF);
    write_file(path, f);
    return path;
  };
  auto header = [](const std::string& dict) {
    std::string h = dict;
    h.append(127 - 10 - h.size(), ' ');
    return h + "\n";
  };
  auto expect = [&](const std::string& dict, size_t bytes, const std::string& needle) {
    try {
      read_npz(make(header(dict), bytes));
      ADD_FAILURE() << "expected CheckpointError for " << dict;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", 16, "dtype '<i8' is not supported");
  expect("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", 16, "needs 20 data bytes, the array has 16");
  expect("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999), }", 16,
         "needs more data bytes, the array has 16");
  expect("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999, 1), }", 16, "dimension too large");
  expect("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (4,), }", 16, "expected True or False");
  expect("{'descr': '<f4', 'shape': (4,), }", 16, "needs 'descr', 'fortran_order' and 'shape'");
  // And the same construction with a valid header does load: the helper itself is sound.
  const auto ok = read_npz(make(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"), 16));
  EXPECT_EQ(ok[0].second.shape(), (Shape{2, 2}));
}

TEST(Npz, ModuleImportIsStrictAndTransactional) {
  auto a = std::make_shared<Mlp>(5);
  fill_formula(*a);
  const auto path = tmp_path("mlp.npz");
  export_npz(*a, path);
  auto b = std::make_shared<Mlp>(5);
  EXPECT_TRUE(import_npz(*b, path).ok());
  EXPECT_EQ(b->fc2->weight.to_vector(), a->fc2->weight.to_vector());
  EXPECT_EQ(b->find("running_mean").to_vector(), a->find("running_mean").to_vector());

  auto c = std::make_shared<Mlp>(6);
  const auto before = c->fc2->bias.to_vector();
  try {
    import_npz(*c, path);
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("fc1.weight: the model has [6, 3], the file has [5, 3]"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(c->fc2->bias.to_vector(), before);  // fits, but nothing loads when anything fails
  const auto r = import_npz(*c, path, LoadOptions().strict(false));
  EXPECT_EQ(r.mismatched.size(), 3u);
  EXPECT_EQ(c->fc2->bias.to_vector(), a->fc2->bias.to_vector());
}

TEST(Npz, RoundTripThroughNumpy) {
  if (std::system((kPython + " -c 'import numpy' > /dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << kPython << " with numpy is not available (scripts/install-deps.sh installs python3-numpy)";
  auto m = std::make_shared<Mlp>(5);
  fill_formula(*m);
  const auto in = tmp_path("to_numpy.npz"), out = tmp_path("from_numpy.npz");
  export_npz(*m, in);
  std::string cmd = kPython + " " + TAPEGRAD_SOURCE_DIR + "/tests/npz_roundtrip.py " + in + " " + out;
  for (auto& [key, t] : m->named_state()) cmd += " " + key + "=" + shape_arg(t.shape());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  // numpy wrote 2v + 1 for every array (2-D ones in Fortran order); read it into the model.
  auto back = std::make_shared<Mlp>(5);
  ASSERT_TRUE(import_npz(*back, out).ok());
  for (auto& [key, t] : back->named_state()) {
    const auto v = t.to_vector();
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], 2 * value(key, i) + 1) << key << "[" << i << "]";
  }
  // A mismatch is detected on the Python side too (the test can fail).
  const std::string wrong = kPython + " " + TAPEGRAD_SOURCE_DIR + "/tests/npz_roundtrip.py " + in +
                            " " + tmp_path("unused.npz") + " fc1.weight=3x5 > /dev/null";
  EXPECT_NE(std::system(wrong.c_str()), 0);
}

TEST(Npz, LoadsWeightsTrainedInPyTorch) {
  // tests/fixtures/checkpoint/make_torch_fixture.py trained an MLP 4-8-3 (tanh) in PyTorch and
  // saved its state_dict with np.savez, plus an input and the model's output.
  struct TorchMlp : nn::Module {
    std::shared_ptr<nn::Linear> fc1, fc2;
    TorchMlp() : Module("TorchMlp") {
      fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
      fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 3));
    }
  };
  TorchMlp m;
  ASSERT_TRUE(import_npz(m, kData + "torch_mlp.npz").ok());
  const auto io = read_npz(kData + "torch_mlp_io.npz");
  ASSERT_EQ(io.size(), 2u);
  const Tensor y = m.fc2->forward(tanh(m.fc1->forward(io[0].second)));
  const auto got = y.to_vector(), want = io[1].second.to_vector();
  ASSERT_EQ(y.shape(), io[1].second.shape());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

// Regression: a zip whose central directory lists the same stored member twice (every CRC
// valid) made read_npz build one array per listing: a 1.5 MB file allocated 2.4 GB. Members
// that share bytes are refused, as numpy refuses them ("Overlapped entries").
TEST(Npz, RefusesMembersThatShareBytes) {
  const auto path = tmp_path("one.npz");
  write_npz(path, {{"a", ones({64})}});
  const std::string one = read_file(path);
  const size_t eocd = one.size() - 22;
  const uint64_t cd_size = get_le(one, eocd + 12, 4), cd_offset = get_le(one, eocd + 16, 4);
  const std::string central = one.substr(cd_offset, cd_size);
  std::string twice = one.substr(0, cd_offset) + central + central + one.substr(eocd);
  const size_t e2 = twice.size() - 22;
  test_util::set_le(twice, e2 + 8, 2, 2);  // entries on this disk
  test_util::set_le(twice, e2 + 10, 2, 2);  // entries in all
  test_util::set_le(twice, e2 + 12, 2 * cd_size, 4);
  const auto bad = tmp_path("twice.npz");
  write_file(bad, twice);
  try {
    read_npz(bad);
    FAIL() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << e.what();
  }
}
