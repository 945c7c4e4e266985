// The GPU's cache of device copies (lib/cuda/gemm_cuda.cpp, backend/device.cpp, ops/matmul.cpp)
// on the emulated device of tests/fake_cuda: host memory stands in for the device and a plain
// loop for cuBLAS, so the cache's logic runs on every machine. A hit is seen in the counters
// (device_cache_stats) and in the results: after each kind of write to a weight, the next
// product must upload it again and agree with OpenBLAS.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "plugin_abi.h"
#include "tapegrad/tapegrad.h"

namespace {

#ifdef TAPEGRAD_CUDA_EMULATED_PLUGIN

/// The plugin under test: the emulated one, or TAPEGRAD_TEST_CUDA_PLUGIN's (bench/gpu_check.sh
/// runs these tests on a real GPU with the real plugin).
const char* plugin_under_test() {
  const char* e = std::getenv("TAPEGRAD_TEST_CUDA_PLUGIN");
  return e && *e ? e : TAPEGRAD_CUDA_EMULATED_PLUGIN;
}

/// Products on the plugin's device from here on (every product: Device::CUDA), cache on.
void use_emulated_device(int64_t budget = int64_t(1) << 30) {
  ::setenv("TAPEGRAD_CUDA_PLUGIN", plugin_under_test(), 1);
  tg::set_device(tg::Device::CUDA);
  ASSERT_EQ(tg::current_device(), tg::Device::CUDA) << tg::device_status();
  tg::set_device_cache_budget(budget);
}

/// The same product on OpenBLAS.
tg::Tensor on_cpu(const std::function<tg::Tensor()>& f) {
  tg::set_device(tg::Device::CPU);
  tg::Tensor y = f();
  tg::set_device(tg::Device::CUDA);
  return y;
}

::testing::AssertionResult same(const tg::Tensor& a, const tg::Tensor& b, float tol = 1e-5f) {
  const auto x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < x.size(); ++i)
    if (std::abs(x[i] - y[i]) > tol * (1 + std::abs(y[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  return ::testing::AssertionSuccess();
}

struct Delta {
  tg::DeviceCacheStats before = tg::device_cache_stats();
  int64_t hits() const { return tg::device_cache_stats().hits - before.hits; }
  int64_t misses() const { return tg::device_cache_stats().misses - before.misses; }
  int64_t uploaded() const {
    return tg::device_cache_stats().uploaded_bytes - before.uploaded_bytes;
  }
};

TEST(DeviceCache, WeightUploadedOnceThenReused) {
  use_emulated_device();
  tg::manual_seed(1);
  const tg::Tensor w = tg::randn({3, 4}, true), x = tg::randn({2, 4});
  Delta first;
  (void)tg::linear(x, w);
  EXPECT_EQ(first.misses(), 2);  // x and w are leaves: both are named to the cache
  EXPECT_EQ(first.uploaded(), (3 * 4 + 2 * 4) * 4);
  Delta second;
  const tg::Tensor y2 = tg::linear(x, w);
  EXPECT_EQ(second.hits(), 2);
  EXPECT_EQ(second.misses(), 0);
  EXPECT_EQ(second.uploaded(), 0) << "nothing crosses the bus for a repeated product";
  EXPECT_TRUE(same(y2, on_cpu([&] { return tg::linear(x, w); })));
}

TEST(DeviceCache, EveryKindOfWriteUploadsAgain) {
  use_emulated_device();
  tg::manual_seed(2);
  auto model = std::make_shared<tg::nn::Linear>(tg::nn::LinearOptions(4, 3).bias(false));
  const tg::Tensor w = model->parameters()[0];
  const tg::Tensor x = tg::randn({5, 4});
  auto check = [&](const char* what, const std::function<void()>& write) {
    (void)tg::linear(x, w);  // cached as it is
    write();
    Delta d;
    const tg::Tensor y = tg::linear(x, w);
    EXPECT_EQ(d.misses(), 1) << what << ": the weight must be uploaded again";
    EXPECT_EQ(d.hits(), 1) << what << ": the unchanged input stays cached";
    EXPECT_TRUE(same(y, on_cpu([&] { return tg::linear(x, w); }))) << what;
  };
  check("in-place op", [&] {
    tg::NoGradGuard g;
    w.mul_(0.5f);
  });
  check("copy_", [&] {
    tg::NoGradGuard g;
    w.copy_(tg::randn({3, 4}));
  });
  check("raw write through data()", [&] { w.data()(1, 2) = 7.0f; });
  check("optimizer step", [&] {
    tg::optim::SGD sgd(model->parameters(), tg::optim::SGDOptions(0.1));
    tg::sum(tg::linear(x, w)).backward();
    sgd.step();
  });
  const std::string path = ::testing::TempDir() + "tapegrad_device_cache.tgc";
  auto other = std::make_shared<tg::nn::Linear>(tg::nn::LinearOptions(4, 3).bias(false));
  tg::save(*other, path);
  check("loading a checkpoint", [&] { tg::load(*model, path); });
  std::remove(path.c_str());
  EXPECT_TRUE(same(w, other->parameters()[0], 0.0f));
}

TEST(DeviceCache, BackwardReusesTheForwardsCopies) {
  use_emulated_device();
  tg::manual_seed(3);
  const tg::Tensor w = tg::randn({6, 5}, true), x = tg::randn({4, 5}, true);
  const tg::Tensor y = tg::linear(x, w);
  Delta d;
  tg::sum(y * y).backward();
  EXPECT_EQ(d.hits(), 2) << "dx = G·W reads w, dW = Gᵀ·x reads x: both cached by the forward";
  EXPECT_EQ(d.misses(), 0);
  tg::Tensor gx, gw;
  {
    tg::set_device(tg::Device::CPU);
    const tg::Tensor w2 = w.detach().clone().requires_grad_(),
                     x2 = x.detach().clone().requires_grad_();
    const tg::Tensor y2 = tg::linear(x2, w2);
    tg::sum(y2 * y2).backward();
    gx = x2.grad();
    gw = w2.grad();
    tg::set_device(tg::Device::CUDA);
  }
  EXPECT_TRUE(same(x.grad(), gx, 1e-4f));
  EXPECT_TRUE(same(w.grad(), gw, 1e-4f));
}

TEST(DeviceCache, ActivationsAreNotCached) {
  use_emulated_device();
  tg::manual_seed(4);
  const tg::Tensor w = tg::randn({3, 4}), x0 = tg::randn({2, 4}, true);
  const tg::Tensor h = x0 * 2.0f;  // an op's output: seen once, never named to the cache
  Delta d;
  (void)tg::linear(h, w);
  (void)tg::linear(h, w);
  EXPECT_EQ(d.misses(), 1);
  EXPECT_EQ(d.hits(), 1);
  EXPECT_EQ(d.uploaded(), (3 * 4 + 2 * 2 * 4) * 4) << "h crosses the bus for each product";
}

TEST(DeviceCache, LeastRecentlyUsedMakesRoom) {
  const int64_t bytes = 3 * 4 * 4;  // one (3, 4) weight
  use_emulated_device(2 * bytes + 8);
  tg::manual_seed(5);
  const tg::Tensor x = tg::randn({2, 4}, true) * 1.0f;  // not a leaf: never cached
  const tg::Tensor w1 = tg::randn({3, 4}), w2 = tg::randn({3, 4}), w3 = tg::randn({3, 4});
  const auto before = tg::device_cache_stats();
  (void)tg::linear(x, w1);
  (void)tg::linear(x, w2);
  EXPECT_EQ(tg::device_cache_stats().entries, 2);
  (void)tg::linear(x, w3);  // w1 is the least recent
  auto now = tg::device_cache_stats();
  EXPECT_EQ(now.entries, 2);
  EXPECT_EQ(now.evictions - before.evictions, 1);
  EXPECT_LE(now.bytes, now.budget);
  Delta d;
  (void)tg::linear(x, w3);
  EXPECT_EQ(d.hits(), 1);
  const tg::Tensor y = tg::linear(x, w1);
  EXPECT_EQ(d.misses(), 1) << "w1 was evicted";
  EXPECT_TRUE(same(y, on_cpu([&] { return tg::linear(x, w1); })));
  // A weight larger than the whole budget is not cached, and still right.
  const tg::Tensor big = tg::randn({8, 4});
  EXPECT_TRUE(same(tg::linear(x, big), on_cpu([&] { return tg::linear(x, big); })));
  EXPECT_LE(tg::device_cache_stats().bytes, tg::device_cache_stats().budget);
}

TEST(DeviceCache, CopiesDieWithTheirStorage) {
  use_emulated_device();
  const int64_t entries = tg::device_cache_stats().entries;
  {
    const tg::Tensor w = tg::randn({3, 4}), x = tg::randn({2, 4});
    (void)tg::linear(x, w);
    EXPECT_EQ(tg::device_cache_stats().entries, entries + 2);
  }
  EXPECT_EQ(tg::device_cache_stats().entries, entries);
  EXPECT_EQ(tg::device_cache_stats().bytes, 0);
}

TEST(DeviceCache, ViewsOfOneStorageAreDifferentOperands) {
  use_emulated_device();
  tg::manual_seed(6);
  const tg::Tensor w = tg::randn({6, 4}), x = tg::randn({2, 4}, true) * 1.0f;  // x: not a leaf
  const tg::Tensor top = tg::narrow(w, 0, 0, 3), bottom = tg::narrow(w, 0, 3, 3);
  const tg::Tensor wt = tg::t(w);  // (4, 6): the same elements through other strides
  Delta d;
  const tg::Tensor a = tg::linear(x, top), b = tg::linear(x, bottom);
  const tg::Tensor c = tg::matmul(x, wt);
  EXPECT_EQ(d.misses(), 3);
  EXPECT_TRUE(same(a, on_cpu([&] { return tg::linear(x, top); })));
  EXPECT_TRUE(same(b, on_cpu([&] { return tg::linear(x, bottom); })));
  EXPECT_TRUE(same(c, on_cpu([&] { return tg::matmul(x, wt); })));
  {  // a write through one view changes the storage all three share
    tg::NoGradGuard g;
    top.mul_(-1.0f);
  }
  Delta after;
  EXPECT_TRUE(same(tg::linear(x, bottom), on_cpu([&] { return tg::linear(x, bottom); })));
  EXPECT_TRUE(same(tg::matmul(x, wt), on_cpu([&] { return tg::matmul(x, wt); })));
  EXPECT_EQ(after.hits(), 0);
}

TEST(DeviceCache, TrainingMatchesTheCpu) {
  auto run = [](tg::Device device) {
    tg::set_device(device);
    tg::manual_seed(7);
    auto model = std::make_shared<tg::nn::Sequential>(
        std::make_shared<tg::nn::Linear>(8, 16), std::make_shared<tg::nn::Tanh>(),
        std::make_shared<tg::nn::Linear>(16, 2));
    tg::optim::SGD sgd(model->parameters(), tg::optim::SGDOptions(0.05));
    const tg::Tensor x = tg::randn({32, 8}), target = tg::randn({32, 2});
    std::vector<float> losses;
    for (int step = 0; step < 6; ++step) {
      sgd.zero_grad();
      const tg::Tensor loss = tg::mse_loss(model->forward(x), target);
      loss.backward();
      sgd.step();
      losses.push_back(loss.item());
    }
    return losses;
  };
  use_emulated_device();
  const auto before = tg::device_cache_stats();
  const std::vector<float> gpu = run(tg::Device::CUDA);
  const auto after = tg::device_cache_stats();
  const std::vector<float> cpu = run(tg::Device::CPU);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i) EXPECT_NEAR(gpu[i], cpu[i], 1e-5f * (1 + cpu[i])) << i;
  EXPECT_GT(after.hits - before.hits, 0) << "backward reuses the forward's weight copies";
}

TEST(DeviceCache, RecurrencesKeepTheirHiddenWeight) {
  use_emulated_device();
  auto run = [](tg::Device device) {
    tg::set_device(device);
    tg::manual_seed(8);
    tg::nn::GRU gru(5, 7);
    const tg::Tensor x = tg::randn({6, 3, 5});  // (T, B, C)
    const tg::nn::RNNOutput out = gru.forward(x);
    tg::sum(out.output * out.output).backward();
    std::vector<tg::Tensor> r = {out.output};
    for (const tg::Tensor& p : gru.parameters()) r.push_back(p.grad());
    return r;
  };
  Delta d;
  const auto gpu = run(tg::Device::CUDA);
  EXPECT_GE(d.hits(), 2 * 6 - 2) << "W_hh is uploaded once for the T steps forward and back";
  const auto cpu = run(tg::Device::CPU);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i) EXPECT_TRUE(same(gpu[i], cpu[i], 1e-4f)) << i;
}

TEST(DeviceCache, BudgetZeroTurnsItOff) {
  use_emulated_device(0);
  const tg::Tensor w = tg::randn({3, 4}), x = tg::randn({2, 4});
  Delta d;
  (void)tg::linear(x, w);
  (void)tg::linear(x, w);
  EXPECT_EQ(d.hits() + d.misses(), 0) << "no operand is named to a disabled cache";
  EXPECT_EQ(d.uploaded(), 2 * (3 * 4 + 2 * 4) * 4);
  EXPECT_THROW(tg::set_device_cache_budget(-1), tg::ValueError);
}

// The plugin's cache through its C ABI: a key is trusted (a hit uses the device copy even if
// the host values changed under the same key), a new stamp replaces the copy, forget drops it.
TEST(DeviceCachePlugin, KeysStampsAndForget) {
  void* h = dlopen(plugin_under_test(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto init = reinterpret_cast<tg_cuda_init_fn>(dlsym(h, "tg_cuda_init"));
  auto sgemm = reinterpret_cast<tg_cuda_sgemm_fn>(dlsym(h, "tg_cuda_sgemm"));
  auto forget = reinterpret_cast<tg_cuda_forget_fn>(dlsym(h, "tg_cuda_forget"));
  auto budget = reinterpret_cast<tg_cuda_set_cache_budget_fn>(dlsym(h, "tg_cuda_set_cache_budget"));
  auto stats = reinterpret_cast<tg_cuda_cache_stats_fn>(dlsym(h, "tg_cuda_get_cache_stats"));
  ASSERT_TRUE(init && sgemm && forget && budget && stats);
  char msg[256] = {0};
  ASSERT_EQ(init(msg, sizeof msg), 0) << msg;
  budget(1 << 20);
  // C (1, 1) = A (1, 2) · B (2, 1), B named as storage 9001.
  std::vector<float> a = {1, 2}, b = {3, 4};
  float c = 0;
  tg_cuda_operand id{9001, 1};
  tg_cuda_cache_stats s0{}, s{};
  stats(&s0);
  ASSERT_EQ(sgemm(0, 0, 1, 1, 2, 1, a.data(), 2, nullptr, b.data(), 1, &id, 0, &c, 1, msg, sizeof msg), 0) << msg;
  EXPECT_EQ(c, 11);
  b = {5, 6};  // the caller promised the stamp changes with every write: the copy is used
  ASSERT_EQ(sgemm(0, 0, 1, 1, 2, 1, a.data(), 2, nullptr, b.data(), 1, &id, 0, &c, 1, msg, sizeof msg), 0);
  EXPECT_EQ(c, 11) << "a hit must read the device copy, not upload again";
  id.stamp = 2;  // a write: the old copy goes, the new values come
  ASSERT_EQ(sgemm(0, 0, 1, 1, 2, 1, a.data(), 2, nullptr, b.data(), 1, &id, 0, &c, 1, msg, sizeof msg), 0);
  EXPECT_EQ(c, 17);
  stats(&s);
  EXPECT_EQ(s.hits - s0.hits, 1u);
  EXPECT_EQ(s.misses - s0.misses, 2u);
  EXPECT_EQ(s.entries - s0.entries, 1u) << "one copy per storage and stamp";
  forget(9001);
  stats(&s);
  EXPECT_EQ(s.entries, s0.entries);
  // The same key for both operands (x·xᵀ) is one copy, and is not evicted by itself.
  std::vector<float> m = {1, 2, 3, 4};
  std::vector<float> out(4, 0);
  tg_cuda_operand mid{9002, 1};
  budget(4 * sizeof(float));
  ASSERT_EQ(sgemm(0, 1, 2, 2, 2, 1, m.data(), 2, &mid, m.data(), 2, &mid, 0, out.data(), 2, msg, sizeof msg), 0) << msg;
  EXPECT_EQ(out, (std::vector<float>{5, 11, 11, 25}));
  forget(9002);
}

#else
TEST(DeviceCache, EmulatedPluginNotBuilt) { GTEST_SKIP() << "the emulated plugin is not built"; }
#endif

}  // namespace
