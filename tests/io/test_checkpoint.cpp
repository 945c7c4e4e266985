// Checkpoints: save/load of weights, whole training states, the documented file format,
// strict and non-strict loads, all-or-nothing restores, and atomic saves.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <thread>

#include <cstdio>
#include <cstring>

#include "tapegrad/checkpoint.h"
#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;

namespace {
/// How many temporaries of `path`'s saves (PATH.tmp-...) are in its folder.
int temporaries(const std::string& path) {
  const std::string dir = path.substr(0, path.find_last_of('/'));
  const std::string prefix = path.substr(path.find_last_of('/') + 1) + ".tmp";
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) n += std::string(e->d_name).rfind(prefix, 0) == 0;
    ::closedir(d);
  }
  return n;
}

std::string boot_tag() {
  std::string id;
  for (char c : test_util::read_file("/proc/sys/kernel/random/boot_id"))
    if (std::isxdigit(static_cast<unsigned char>(c)) && id.size() < 8) id += c;
  return id.empty() ? "0" : id;
}
}  // namespace
using test_util::get_le;
using test_util::read_file;
using test_util::set_le;
using test_util::write_file;

namespace {

struct Net : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  explicit Net(int64_t hidden = 4, bool bias2 = true) : Module("Net") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(3, hidden));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(nn::LinearOptions(hidden, 2).bias(bias2)));
    register_buffer("scale", full({2}, 0.5f));
  }
};

std::shared_ptr<Net> random_net(uint64_t seed, int64_t hidden = 4, bool bias2 = true) {
  manual_seed(seed);
  auto net = std::make_shared<Net>(hidden, bias2);
  for (auto& [n, t] : net->named_state())
    for (float& v : t.data()) v = default_generator().normal();
  return net;
}

std::vector<std::vector<float>> values(const nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (auto& [n, t] : m.named_state()) out.push_back(t.to_vector());
  return out;
}

std::string tmp_path(const std::string& name) {
  static const test_util::ScratchDir dir("tg_ckpt");
  return dir.path(name);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

/// The CRC the textbook way, one bit at a time, to check the table-driven one.
uint32_t crc32_bitwise(const unsigned char* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

/// A stand-in optimizer for restore(): state is one number; loading can be made to fail.
struct Counter {
  double value = 0;
  bool fail_on_load = false;
  StateDict state_dict() const {
    StateDict s;
    s.numbers["value"] = value;
    return s;
  }
  void load_state_dict(const StateDict& s) {
    const double v = s.number_at("value", "Counter");
    if (fail_on_load) throw CheckpointError("Counter: refusing to load");
    value = v;
  }
};

}  // namespace

TEST(Crc32, KnownValuesAndBitwiseReference) {
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);  // the standard check value
  EXPECT_EQ(crc32("", 0), 0u);
  EXPECT_EQ(crc32("a", 1), 0xE8B7BE43u);
  std::vector<unsigned char> buf(1000);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t n : {1, 7, 8, 9, 63, 64, 65, 999, 1000})
    for (size_t off : {0, 1, 3})
      if (off + n <= buf.size()) EXPECT_EQ(crc32(buf.data() + off, n), crc32_bitwise(buf.data() + off, n));
  // Continuing a CRC over two pieces equals one pass.
  EXPECT_EQ(crc32(buf.data() + 300, 700, crc32(buf.data(), 300)), crc32(buf.data(), 1000));
}

TEST(Checkpoint, SaveLoadWeightsIsExact) {
  auto a = random_net(1), b = random_net(2);
  ASSERT_NE(values(*a), values(*b));
  const auto path = tmp_path("weights.ckpt");
  save(*a, path);
  const LoadReport r = load(*b, path);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.loaded.size(), 5u);
  EXPECT_EQ(values(*a), values(*b));
  // Loading writes values into the existing parameters; they stay parameters.
  EXPECT_TRUE(b->fc1->weight.requires_grad());
  EXPECT_TRUE(b->find("fc1.weight").is_same(b->fc1->weight));
}

TEST(Checkpoint, FileFollowsTheDocumentedFormat) {
  // A checkpoint small enough to decode by hand, following the spec in checkpoint.h.
  Checkpoint ck;
  ck.step = 0x0102030405060708;
  ck.epoch = -2;
  ck.rng = {1, 2, 3, 4};
  ck.metadata["k"] = "vv";
  ck.model.emplace_back("w", tensor({1.5f, -2.0f}));
  StateDict s;
  s.numbers["lr"] = 0.25;
  ck.set("opt", s);
  const auto path = tmp_path("format.ckpt");
  ck.save(path);
  const std::string f = read_file(path);

  ASSERT_GE(f.size(), 32u);
  EXPECT_EQ(f.substr(0, 8), "TAPEGRAD");
  EXPECT_EQ(get_le(f, 8, 4), 1u);                  // version
  EXPECT_EQ(get_le(f, 12, 4), 0u);                 // flags
  EXPECT_EQ(get_le(f, 16, 8), f.size() - 32);      // payload size
  EXPECT_EQ(get_le(f, 24, 4), crc32(f.data() + 32, f.size() - 32));
  EXPECT_EQ(get_le(f, 28, 4), crc32(f.data(), 28));

  size_t p = 32;
  auto u = [&](int bytes) { const uint64_t v = get_le(f, p, bytes); p += bytes; return v; };
  auto str = [&] { const size_t n = u(8); std::string s = f.substr(p, n); p += n; return s; };
  EXPECT_EQ(u(1), 1u);                                   // cereal's byte-order flag
  EXPECT_EQ(u(8), 0x0102030405060708u);                  // step
  EXPECT_EQ(static_cast<int64_t>(u(8)), -2);             // epoch
  for (uint64_t w = 1; w <= 4; ++w) EXPECT_EQ(u(8), w);  // rng
  EXPECT_EQ(u(8), 1u);                                   // metadata
  EXPECT_EQ(str(), "k");
  EXPECT_EQ(str(), "vv");
  EXPECT_EQ(u(8), 1u);                                   // model entries
  EXPECT_EQ(str(), "w");
  EXPECT_EQ(u(4), 1u);                                   // rank
  EXPECT_EQ(u(8), 2u);                                   // dims
  float x[2];
  std::memcpy(x, f.data() + p, 8);  // little-endian host
  p += 8;
  EXPECT_EQ(x[0], 1.5f);
  EXPECT_EQ(x[1], -2.0f);
  EXPECT_EQ(u(8), 1u);                                   // states
  EXPECT_EQ(str(), "opt");
  EXPECT_EQ(u(8), 0u);                                   // tensors
  EXPECT_EQ(u(8), 1u);                                   // numbers
  EXPECT_EQ(str(), "lr");
  double lr;
  std::memcpy(&lr, f.data() + p, 8);
  p += 8;
  EXPECT_EQ(lr, 0.25);
  EXPECT_EQ(u(8), 0u);                                   // strings
  EXPECT_EQ(p, f.size());
}

TEST(Checkpoint, WholeTrainingStateRoundTrips) {
  auto net = random_net(3);
  manual_seed(77);
  default_generator().normal();
  const auto rng_then = default_generator().state();

  Checkpoint ck;  // captures the RNG now
  EXPECT_EQ(ck.rng, rng_then);
  ck.set_model(*net);
  StateDict opt;
  opt.tensors["state.0.momentum_buffer"] = tensor({1, 2, 3});
  opt.tensors["state.1.scalar"] = scalar(4.0f);
  opt.tensors["state.2.empty"] = zeros({0, 3});
  opt.numbers["param_groups.0.lr"] = 0.1;
  opt.numbers["huge"] = 9007199254740993.0;  // the double nearest 2^53 + 1
  opt.strings["type"] = "SGD";
  ck.set("optimizer", opt);
  ck.set("data", StateDict());
  ck.step = 1234;
  ck.epoch = 7;
  ck.metadata["d_model"] = "128";
  ck.metadata["note"] = "utf-8 ✓, with\nnewline and \0 inside";

  // Snapshots: later changes to the model or the StateDict do not reach the checkpoint.
  const auto saved_values = values(*net);
  net->fc1->weight.data()[0] = 99.0f;
  opt.tensors["state.0.momentum_buffer"].data()[0] = 99.0f;

  const auto path = tmp_path("full.ckpt");
  ck.save(path);
  default_generator().normal();  // move the RNG on

  const Checkpoint back = Checkpoint::load(path);
  EXPECT_EQ(back.step, 1234);
  EXPECT_EQ(back.epoch, 7);
  EXPECT_EQ(back.rng, rng_then);
  EXPECT_EQ(back.metadata, ck.metadata);
  ASSERT_EQ(back.model.size(), 5u);
  EXPECT_EQ(back.model[0].first, "fc1.weight");
  EXPECT_EQ(back.model[4].first, "scale");
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(back.model[i].second.to_vector(), saved_values[i]);
  EXPECT_EQ(back.model_tensor("fc2.bias").shape(), (Shape{2}));
  EXPECT_THROW(back.model_tensor("nope"), CheckpointError);
  ASSERT_TRUE(back.has("optimizer"));
  ASSERT_TRUE(back.has("data"));
  const StateDict& o = back.get("optimizer");
  EXPECT_EQ(o.tensor_at("state.0.momentum_buffer", "t").to_vector(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(o.tensor_at("state.1.scalar", "t").shape(), Shape{});
  EXPECT_EQ(o.tensor_at("state.1.scalar", "t").item(), 4.0f);
  EXPECT_EQ(o.tensor_at("state.2.empty", "t").shape(), (Shape{0, 3}));
  EXPECT_EQ(o.number_at("param_groups.0.lr", "t"), 0.1);
  EXPECT_EQ(o.number_at("huge", "t"), 9007199254740993.0);
  EXPECT_EQ(o.string_at("type", "t"), "SGD");
  try {
    back.get("scheduler");
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'data', 'optimizer'"), std::string::npos) << e.what();
  }

  back.restore_rng();
  EXPECT_EQ(default_generator().state(), rng_then);
  // serialize/deserialize is the same payload the file holds.
  EXPECT_EQ(Checkpoint::deserialize(back.serialize()).serialize(), back.serialize());
  EXPECT_EQ(read_file(path).substr(32), back.serialize());
}

TEST(Checkpoint, StrictLoadNamesEveryMisfitAndChangesNothing) {
  auto src = random_net(4);  // fc1 3→4, fc2 4→2 with bias, scale
  const auto path = tmp_path("strict.ckpt");
  save(*src, path);

  auto dst = random_net(5, /*hidden=*/5, /*bias2=*/false);  // fc1 3→5, fc2 5→2, no bias
  dst->register_buffer("extra", zeros({3}));
  const auto before = values(*dst);
  try {
    load(*dst, path);
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find("5 entries do not fit"), std::string::npos) << m;
    EXPECT_NE(m.find("shape      fc1.weight: the model has [5, 3], the file has [4, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("shape      fc1.bias: the model has [5], the file has [4]"), std::string::npos) << m;
    EXPECT_NE(m.find("shape      fc2.weight: the model has [2, 5], the file has [2, 4]"), std::string::npos) << m;
    EXPECT_NE(m.find("missing    extra: the model has [3]"), std::string::npos) << m;
    EXPECT_NE(m.find("unexpected fc2.bias: the file has [2]"), std::string::npos) << m;
    EXPECT_EQ(m.find("scale"), std::string::npos) << m;  // it fits: not listed
  }
  EXPECT_EQ(values(*dst), before);
}

TEST(Checkpoint, NonStrictLoadsWhatFitsAndReports) {
  auto src = random_net(6);
  const auto path = tmp_path("loose.ckpt");
  save(*src, path);
  auto dst = random_net(7, 5, false);
  const LoadReport r = load(*dst, path, LoadOptions().strict(false));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.loaded, (std::vector<std::string>{"scale"}));
  EXPECT_TRUE(r.missing.empty());
  EXPECT_EQ(r.unexpected, (std::vector<std::string>{"fc2.bias"}));
  ASSERT_EQ(r.mismatched.size(), 3u);
  EXPECT_EQ(r.mismatched[0].key, "fc1.weight");
  EXPECT_EQ(r.mismatched[0].expected, (Shape{5, 3}));
  EXPECT_EQ(r.mismatched[0].actual, (Shape{4, 3}));
  EXPECT_EQ(dst->find("scale").to_vector(), src->find("scale").to_vector());
  EXPECT_NE(r.to_string().find("unexpected fc2.bias"), std::string::npos);
  // A module with one more layer: everything else loads, the new one is reported missing.
  auto wider = random_net(8);
  wider->register_module("head", std::make_shared<nn::Linear>(2, 2));
  const auto r2 = load(*wider, path, LoadOptions().strict(false));
  EXPECT_EQ(r2.missing, (std::vector<std::string>{"head.weight", "head.bias"}));
  EXPECT_EQ(wider->fc1->weight.to_vector(), src->fc1->weight.to_vector());
}

TEST(Checkpoint, RestoreIsAllOrNothing) {
  auto src = random_net(9);
  Counter opt_src, sched_src;
  opt_src.value = 10;
  sched_src.value = 20;
  Checkpoint ck;
  ck.set_model(*src);
  ck.set("optimizer", opt_src.state_dict());
  ck.set("scheduler", sched_src.state_dict());
  ck.rng = {5, 6, 7, 8};
  const auto path = tmp_path("restore.ckpt");
  ck.save(path);
  const auto back = Checkpoint::load(path);

  auto dst = random_net(10);
  const auto rng_before = default_generator().state();
  const auto dst_before = values(*dst);
  Counter opt, sched;
  opt.value = 1;
  sched.value = 2;

  // The scheduler refuses: the optimizer already loaded is put back, the model and RNG untouched.
  sched.fail_on_load = true;
  EXPECT_THROW(back.restore(*dst, {{"optimizer", opt}, {"scheduler", sched}}), CheckpointError);
  EXPECT_EQ(opt.value, 1);
  EXPECT_EQ(sched.value, 2);
  EXPECT_EQ(values(*dst), dst_before);
  EXPECT_EQ(default_generator().state(), rng_before);

  // A state the checkpoint lacks: nothing happens.
  sched.fail_on_load = false;
  EXPECT_THROW(back.restore(*dst, {{"optimizer", opt}, {"data", sched}}), CheckpointError);
  EXPECT_EQ(opt.value, 1);
  EXPECT_EQ(values(*dst), dst_before);

  // A model that does not fit: nothing happens.
  auto other = random_net(11, 6);
  const auto other_before = values(*other);
  EXPECT_THROW(back.restore(*other, {{"optimizer", opt}}), CheckpointError);
  EXPECT_EQ(opt.value, 1);
  EXPECT_EQ(values(*other), other_before);

  back.restore(*dst, {{"optimizer", opt}, {"scheduler", sched}});
  EXPECT_EQ(opt.value, 10);
  EXPECT_EQ(sched.value, 20);
  EXPECT_EQ(values(*dst), values(*src));
  EXPECT_EQ(default_generator().state(), (Generator::State{5, 6, 7, 8}));
}

TEST(Checkpoint, FailedSaveLeavesThePreviousFileIntact) {
  auto a = random_net(12), b = random_net(13);
  const auto path = tmp_path("atomic.ckpt");
  save(*a, path);
  const std::string good = read_file(path);
  for (int64_t after : {int64_t(0), int64_t(1), int64_t(31), int64_t(100), int64_t(good.size() - 1)}) {
    detail::fail_next_write_after(after);
    try {
      save(*b, path);
      FAIL() << "expected IOError after " << after << " bytes";
    } catch (const IOError& e) {
      EXPECT_NE(std::string(e.what()).find("injected failure after " + std::to_string(after)),
                std::string::npos) << e.what();
    }
    EXPECT_EQ(read_file(path), good);
    EXPECT_EQ(temporaries(path), 0);
    auto c = random_net(14);
    load(*c, path);
    EXPECT_EQ(values(*c), values(*a));
  }
  // The hook is one-shot: the next save goes through.
  save(*b, path);
  auto c = random_net(15);
  load(*c, path);
  EXPECT_EQ(values(*c), values(*b));
}


TEST(Checkpoint, CrashLeftoversAndUncreatableTempFiles) {
  auto a = random_net(16), b = random_net(17);
  const auto path = tmp_path("leftover.ckpt");
  save(*a, path);
  // A save killed half-way leaves PATH.tmp-<boot>-<pid>-<n>. Loads ignore it; the next save
  // removes it when its process is gone on this boot, and leaves anyone else's alone.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const std::string boot = boot_tag();
  const std::string stale = path + ".tmp-" + boot + "-" + std::to_string(dead) + "-0";
  const std::string live = path + ".tmp-" + boot + "-" + std::to_string(::getppid()) + "-0";
  const std::string other_boot = path + ".tmp-00000000-" + std::to_string(dead) + "-0";
  for (const auto& f : {stale, live, other_boot}) write_file(f, "TAPEGRAD partial");
  auto c = random_net(18);
  load(*c, path);
  EXPECT_EQ(values(*c), values(*a));
  save(*b, path);
  EXPECT_FALSE(exists(stale));
  EXPECT_TRUE(exists(live));
  EXPECT_TRUE(exists(other_boot) || boot == "00000000");
  ::unlink(live.c_str());
  ::unlink(other_boot.c_str());
  load(*c, path);
  EXPECT_EQ(values(*c), values(*b));
  // A folder that does not exist.
  EXPECT_THROW(save(*a, tmp_path("no/such/dir/x.ckpt")), IOError);
  // Loading a file that does not exist is an IOError, not a crash.
  EXPECT_THROW(Checkpoint::load(tmp_path("missing.ckpt")), IOError);
}

TEST(Checkpoint, ClearErrorsForDamagedHeaders) {
  auto a = random_net(19);
  const auto path = tmp_path("hdr.ckpt");
  save(*a, path);
  const std::string good = read_file(path);
  auto expect_error = [&](std::string bytes, const std::string& needle) {
    const auto p = tmp_path("hdr_bad.ckpt");
    write_file(p, bytes);
    try {
      Checkpoint::load(p);
      ADD_FAILURE() << "expected CheckpointError containing '" << needle << "'";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto with_le = [](std::string s, size_t at, uint64_t v, int bytes) {
    set_le(s, at, v, bytes);
    return s;
  };
  auto fix_header_crc = [&](const std::string& s) { return with_le(s, 28, crc32(s.data(), 28), 4); };
  expect_error("", "truncated: the file has 0 bytes");
  expect_error(good.substr(0, 20), "truncated: the file has 20 bytes");
  expect_error("GGUF" + good.substr(4), "not a tapegrad checkpoint");
  expect_error("PK\x03\x04" + good.substr(4), "npz");
  expect_error(with_le(good, 8, 2, 4), "damaged header");
  expect_error(fix_header_crc(with_le(good, 8, 2, 4)), "format version 2 was written by a newer tapegrad");
  expect_error(fix_header_crc(with_le(good, 8, 0, 4)), "format version 0 is invalid");
  expect_error(fix_header_crc(with_le(good, 12, 1, 4)), "unknown header flags");
  expect_error(fix_header_crc(with_le(good, 16, uint64_t(1) << 62, 8)),
               "truncated: the header declares a 4611686018427387904-byte payload");
  expect_error(good.substr(0, good.size() - 1), "truncated");
  expect_error(good + "x", "1 unexpected bytes after");
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x10;
  expect_error(flipped, "the payload is damaged: its CRC-32 is");
}

// A path that exists and is not a regular file is never replaced (as root, saving over
// /dev/null used to replace the device with a regular file).
TEST(Checkpoint, RefusesToReplaceWhatIsNotARegularFile) {
  auto a = random_net(30);
  const auto fifo = tmp_path("a.fifo"), dir = tmp_path("a.dir"), link = tmp_path("a.link");
  const auto target = tmp_path("target.ckpt");
  ::unlink(fifo.c_str());
  ::rmdir(dir.c_str());
  ::unlink(link.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  save(*a, target);
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  for (const auto& [p, kind] : std::vector<std::pair<std::string, std::string>>{
           {fifo, "a FIFO"}, {dir, "a directory"}, {link, "a symbolic link"}, {"/dev/null", "a device"}}) {
    try {
      save(*a, p);
      ADD_FAILURE() << "no error for " << p;
    } catch (const IOError& e) {
      EXPECT_NE(std::string(e.what()).find(kind), std::string::npos) << e.what();
    }
  }
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(temporaries(fifo) + temporaries(link), 0);
}

// Two savers on one path never share a temporary file: every read sees a whole checkpoint,
// and the old good file is never lost.
TEST(Checkpoint, ConcurrentSaversNeverExposeAPartialFile) {
  auto a = random_net(31), b = random_net(32);
  const auto path = tmp_path("race.ckpt");
  save(*a, path);
  std::atomic<bool> stop{false};
  std::vector<std::thread> savers;
  for (auto* m : {a.get(), b.get()})
    savers.emplace_back([m, &path, &stop] {
      while (!stop) save(*m, path);
    });
  int reads = 0, bad = 0;
  for (; reads < 200; ++reads) {
    auto c = random_net(33);
    try {
      load(*c, path);
      if (values(*c) != values(*a) && values(*c) != values(*b)) ++bad;
    } catch (const Error& e) {
      ++bad;
      ADD_FAILURE() << e.what();
    }
  }
  stop = true;
  for (auto& t : savers) t.join();
  EXPECT_EQ(bad, 0) << "of " << reads << " reads";
  EXPECT_EQ(temporaries(path), 0);
}

// Regression: each model entry was checked against every earlier one for a duplicate name,
// so loading was quadratic in the number of entries (a 1 MB file took 7.5 s, 4 MB 115 s).
// 200,000 entries load in well under a second now; quadratic, this test would run for hours.
TEST(Checkpoint, ManyEntriesLoad) {
  Checkpoint ck;
  for (int i = 0; i < 200000; ++i) ck.model.emplace_back("p" + std::to_string(i), scalar(static_cast<float>(i)));
  const auto path = tmp_path("many.ckpt");
  ck.save(path);
  const Checkpoint back = Checkpoint::load(path);
  ASSERT_EQ(back.model.size(), 200000u);
  EXPECT_EQ(back.model.back().first, "p199999");
  EXPECT_EQ(back.model.back().second.item(), 199999.0f);
}
