// The thread model (README, "Threads"): independent graphs in separate threads are safe;
// the global generator is locked, so threads that build models or run dropout at once do not
// race; two backward passes that accumulate into one shared leaf are serialized, and the
// leaf's gradient is their sum. CI also runs these under ThreadSanitizer.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tapegrad/tapegrad.h"

using namespace tg;

TEST(Threads, IndependentGraphsInParallel) {
  std::vector<float> grads(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &grads] {
      const Tensor x = full({16}, static_cast<float>(t + 1), true);
      Tensor y = x;
      for (int i = 0; i < 50; ++i) y = tanh(y * 0.5f) + y;
      sum(y).backward();
      grads[t] = x.grad().to_vector()[0];
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {  // each equals the same computation on one thread
    const Tensor x = full({16}, static_cast<float>(t + 1), true);
    Tensor y = x;
    for (int i = 0; i < 50; ++i) y = tanh(y * 0.5f) + y;
    sum(y).backward();
    EXPECT_EQ(grads[t], x.grad().to_vector()[0]);
  }
}

TEST(Threads, BuildingModelsAndDropoutShareTheGeneratorSafely) {
  manual_seed(1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 20; ++i) {
        nn::Linear lin(32, 32);
        const Tensor y = dropout(ones({64}), 0.5f, true);
        const Tensor r = randn({64});
        (void)y;
        (void)r;
      }
    });
  for (auto& th : threads) th.join();
  // Every draw came out of one stream: a bulk draw equals the same number of single draws.
  Generator a(9), b(9);
  std::vector<float> bulk(1000);
  a.fill_uniform(bulk.data(), 1000, -2.0f, 3.0f);
  for (float v : bulk) EXPECT_EQ(v, b.uniform(-2.0f, 3.0f));
}

TEST(Threads, BackwardPassesIntoOneLeafAccumulate) {
  const Tensor w = ones({1000}, true);
  constexpr int kThreads = 4, kRounds = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&w] {
      for (int i = 0; i < kRounds; ++i) sum(w * 2.0f).backward();
    });
  for (auto& th : threads) th.join();
  for (float g : w.grad().to_vector()) EXPECT_EQ(g, 2.0f * kThreads * kRounds);
}
