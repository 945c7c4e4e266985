#pragma once
// One seed for everything: initializers, dropout, rand/randn and data shuffling all draw
// from the global generator, so tg::manual_seed(s) makes a whole run reproducible.
//
// The generator is xoshiro256** seeded through splitmix64: four 64-bit words of state,
// identical on every platform, and saved whole in checkpoints.
#include <array>
#include <cstdint>

namespace tg {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5eed);
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

  using State = std::array<uint64_t, 4>;
  State state() const { return s_; }
  void set_state(const State& s) { s_ = s; }

 private:
  State s_;
};

/// The generator every tg:: random draw uses.
Generator& default_generator();
/// Reseeds the global generator.
void manual_seed(uint64_t seed);

}  // namespace tg
