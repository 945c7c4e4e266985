// tapegrad's buffers (tapegrad/memory.h): live and peak bytes count every tensor buffer, and
// a freed large buffer is reused by the next request of its size class.
#include <gtest/gtest.h>

#include <cstdint>

#include "tapegrad/tapegrad.h"

using namespace tg;

TEST(Memory, LiveAndPeakBytesFollowTheTensors) {
  const int64_t base = memory_stats().live_bytes;
  reset_peak_memory_stats();
  {
    const Tensor a = zeros({1000});
    EXPECT_EQ(memory_stats().live_bytes - base, 4000);
    const Tensor b = ones({250, 4});
    EXPECT_EQ(memory_stats().live_bytes - base, 8000);
  }
  EXPECT_EQ(memory_stats().live_bytes, base);
  EXPECT_EQ(memory_stats().peak_bytes - base, 8000);
  reset_peak_memory_stats();
  EXPECT_EQ(memory_stats().peak_bytes, memory_stats().live_bytes);
}

TEST(Memory, AFreedLargeBufferServesTheNextRequestOfItsSize) {
  empty_cache();
  { const Tensor t = zeros({1 << 18}); }  // 1 MiB, freed into the cache
  const MemoryStats after_free = memory_stats();
  if (after_free.cached_bytes == 0) GTEST_SKIP() << "the cache is off (AddressSanitizer build or TAPEGRAD_BUFFER_CACHE=0)";
  EXPECT_GE(after_free.cached_bytes, 1 << 20);
  { const Tensor t = ones({(1 << 18) - 1000}); }  // a little smaller: the same size class
  const MemoryStats again = memory_stats();
  EXPECT_EQ(again.cache_hits, after_free.cache_hits + 1);
  empty_cache();
  EXPECT_EQ(memory_stats().cached_bytes, 0);
}

TEST(Memory, ValuesOfAReusedBufferAreWhatTheOpWrote) {
  for (int i = 0; i < 3; ++i) {
    const Tensor t = full({1 << 17}, static_cast<float>(i));
    for (float v : t.to_vector()) ASSERT_EQ(v, static_cast<float>(i));
    const Tensor z = zeros({1 << 17});
    for (float v : z.to_vector()) ASSERT_EQ(v, 0.0f);
  }
}

// A request that cannot be met is a tg::MemoryError, and leaves the counters as they were.
TEST(Memory, OutOfMemoryIsAnErrorAndCountsNothing) {
  const int64_t before = memory_stats().live_bytes;
  try {
    (void)zeros({int64_t(1) << 50});  // 4 PiB
    FAIL() << "no error";
  } catch (const MemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("4503599627370496 bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(memory_stats().live_bytes, before);
}
