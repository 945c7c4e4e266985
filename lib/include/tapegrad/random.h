#pragma once
// One seed for everything: initializers, dropout, rand/randn and data shuffling all draw
// from the global generator, so tg::manual_seed(s) makes a whole run reproducible.
//
// The generator is xoshiro256** seeded through splitmix64: four 64-bit words of state,
// identical on every platform, and saved whole in checkpoints.
//
// Threads: every method takes the generator's lock, so threads may share one (the global one
// included) safely; which numbers each thread gets then depends on how the threads interleave.
// Ops that need many numbers draw them in bulk (fill_uniform, fill_normal) under one lock,
// and get exactly the numbers one-by-one calls would give.
#include <array>
#include <cstdint>
#include <mutex>

namespace tg {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5eed);
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  void seed(uint64_t seed);
  uint64_t next_u64();
  /// Uniform in [0, 1), 24 random bits.
  float uniform();
  /// Uniform in [lo, hi).
  float uniform(float lo, float hi);
  /// Standard normal (Box-Muller, one value per call).
  float normal();
  /// Uniform integer in [0, n).
  uint64_t below(uint64_t n);
  /// out[0..n) = n draws of uniform(lo, hi), under one lock.
  void fill_uniform(float* out, int64_t n, float lo = 0.0f, float hi = 1.0f);
  /// out[0..n) = n draws of mean + std·normal(), under one lock.
  void fill_normal(float* out, int64_t n, float mean = 0.0f, float std = 1.0f);

  using State = std::array<uint64_t, 4>;
  State state() const;
  void set_state(const State& s);

 private:
  uint64_t next_locked();
  float uniform_locked() { return static_cast<float>(next_locked() >> 40) * 0x1.0p-24f; }
  float normal_locked();

  mutable std::mutex mutex_;
  State s_;
};

/// The generator every tg:: random draw uses.
Generator& default_generator();
/// Reseeds the global generator.
void manual_seed(uint64_t seed);

}  // namespace tg
