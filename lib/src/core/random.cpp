#include "tapegrad/random.h"

#include <cmath>

namespace tg {
namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Generator::Generator(uint64_t seed) { this->seed(seed); }

void Generator::seed(uint64_t seed) {
  for (auto& w : s_) w = splitmix64(seed);
}

uint64_t Generator::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

float Generator::uniform() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }

float Generator::uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }

float Generator::normal() {
  // Box-Muller in double; u1 in (0, 1] so the log is finite.
  const double u1 = (static_cast<double>(next_u64() >> 11) + 1.0) * 0x1.0p-53;
  const double u2 = static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

uint64_t Generator::below(uint64_t n) {
  // Rejection sampling: no modulo bias.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = next_u64();
  while (x >= limit);
  return x % n;
}

Generator& default_generator() {
  static Generator gen;
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().seed(seed); }

}  // namespace tg
