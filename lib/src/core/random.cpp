// The generator: xoshiro256** (Blackman and Vigna), seeded through splitmix64. Every public
// method takes the lock; the *_locked helpers run under it.
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
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& w : s_) w = splitmix64(seed);
}

Generator::State Generator::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return s_;
}

void Generator::set_state(const State& s) {
  std::lock_guard<std::mutex> lock(mutex_);
  s_ = s;
}

uint64_t Generator::next_locked() {
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

uint64_t Generator::next_u64() {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_locked();
}

float Generator::uniform() {
  std::lock_guard<std::mutex> lock(mutex_);
  return uniform_locked();
}

float Generator::uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }

float Generator::normal_locked() {
  // Box-Muller in double; u1 in (0, 1] so the log is finite.
  const double u1 = (static_cast<double>(next_locked() >> 11) + 1.0) * 0x1.0p-53;
  const double u2 = static_cast<double>(next_locked() >> 11) * 0x1.0p-53;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

float Generator::normal() {
  std::lock_guard<std::mutex> lock(mutex_);
  return normal_locked();
}

uint64_t Generator::below(uint64_t n) {
  // Rejection sampling: no modulo bias.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t x;
  do x = next_locked();
  while (x >= limit);
  return x % n;
}

void Generator::fill_uniform(float* out, int64_t n, float lo, float hi) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int64_t i = 0; i < n; ++i) out[i] = lo + (hi - lo) * uniform_locked();
}

void Generator::fill_normal(float* out, int64_t n, float mean, float std) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int64_t i = 0; i < n; ++i) out[i] = mean + std * normal_locked();
}

Generator& default_generator() {
  static Generator gen;
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().seed(seed); }

}  // namespace tg
