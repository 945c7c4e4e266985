// Sharded data loading (DataLoaderOptions::shard), the sampler side of data parallelism. No
// MPI needed: each "rank" is a loader built with shard(r, W) in this one process.
//  - every epoch, the W shards are disjoint, equally sized and together cover all but the
//    last N mod W samples of the epoch's order;
//  - the ranks' k-th batches together are the k-th batch of one loader at batch W * b;
//  - shuffling follows the shared seed: same seed, same shards; new epoch or seed, new order;
//  - a rank resumes from another rank's saved state; bad shard options are rejected.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "tapegrad/tapegrad.h"

using namespace tg;
using data::DataLoader;
using data::DataLoaderOptions;
using data::TensorDataset;

namespace {

/// A dataset whose single column holds the sample's index, so batches reveal their indices.
TensorDataset indexed(int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return TensorDataset({tensor(v, {n, 1})});
}

std::vector<int64_t> ids(const data::TensorBatch& b) {
  std::vector<int64_t> out;
  for (float x : b.tensors[0].to_vector()) out.push_back(static_cast<int64_t>(x));
  return out;
}

/// Every batch of one epoch.
std::vector<std::vector<int64_t>> epoch(DataLoader<TensorDataset>& loader) {
  std::vector<std::vector<int64_t>> batches;
  for (const auto& b : loader) batches.push_back(ids(b));
  return batches;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace

TEST(DistributedSampler, ShardsAreDisjointEqualAndCoverTheEpoch) {
  for (int64_t n : {1, 7, 12, 13, 64}) {
    for (int64_t w : {1, 2, 3, 4}) {
      for (bool shuffle : {false, true}) {
        SCOPED_TRACE("n=" + std::to_string(n) + " W=" + std::to_string(w) +
                     " shuffle=" + std::to_string(shuffle));
        std::vector<DataLoader<TensorDataset>> ranks;
        for (int64_t r = 0; r < w; ++r)
          ranks.emplace_back(indexed(n), DataLoaderOptions(3).shuffle(shuffle).seed(11).shard(r, w));
        // The unsharded order of the same epochs: positions 0 .. (n / w) * w - 1 are covered.
        DataLoader<TensorDataset> whole(indexed(n), DataLoaderOptions(n).shuffle(shuffle).seed(11));
        for (int e = 0; e < 3; ++e) {
          const std::vector<int64_t> order = flat(epoch(whole));
          std::vector<int64_t> seen;
          for (int64_t r = 0; r < w; ++r) {
            const std::vector<int64_t> shard = flat(epoch(ranks[r]));
            EXPECT_EQ(static_cast<int64_t>(shard.size()), n / w) << "rank " << r;
            EXPECT_EQ(ranks[r].epoch(), e + 1);
            seen.insert(seen.end(), shard.begin(), shard.end());
          }
          std::vector<int64_t> covered(order.begin(), order.begin() + (n / w) * w);
          std::sort(seen.begin(), seen.end());
          std::sort(covered.begin(), covered.end());
          EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), seen.size()) << "overlap";
          EXPECT_EQ(seen, covered);
        }
      }
    }
  }
}

TEST(DistributedSampler, RankBatchesTogetherEqualOneLoaderAtWTimesTheBatch) {
  const int64_t n = 60, b = 4;
  for (int64_t w : {2, 3}) {
    for (bool drop_last : {false, true}) {
      std::vector<DataLoader<TensorDataset>> ranks;
      for (int64_t r = 0; r < w; ++r)
        ranks.emplace_back(indexed(n),
                           DataLoaderOptions(b).shuffle(true).seed(5).drop_last(drop_last).shard(r, w));
      DataLoader<TensorDataset> big(indexed(n),
                                    DataLoaderOptions(w * b).shuffle(true).seed(5).drop_last(drop_last));
      for (int e = 0; e < 2; ++e) {
        auto big_batches = epoch(big);
        std::vector<std::vector<std::vector<int64_t>>> per_rank;
        for (auto& l : ranks) per_rank.push_back(epoch(l));
        EXPECT_EQ(static_cast<int64_t>(per_rank[0].size()), ranks[0].num_batches());
        for (int64_t k = 0; k < static_cast<int64_t>(per_rank[0].size()); ++k) {
          std::vector<int64_t> joined;
          for (int64_t r = 0; r < w; ++r) {
            ASSERT_EQ(per_rank[r].size(), per_rank[0].size()) << "ranks take different step counts";
            joined.insert(joined.end(), per_rank[r][k].begin(), per_rank[r][k].end());
          }
          ASSERT_LT(k, static_cast<int64_t>(big_batches.size()));
          std::vector<int64_t> expect = big_batches[k];
          std::sort(joined.begin(), joined.end());
          std::sort(expect.begin(), expect.end());
          EXPECT_EQ(joined, expect) << "W=" << w << " epoch " << e << " batch " << k;
        }
      }
    }
  }
}

TEST(DistributedSampler, ShuffledUnderTheSharedSeed) {
  const int64_t n = 40, w = 2;
  auto shard = [&](int64_t r, uint64_t seed, int epochs) {
    DataLoader<TensorDataset> l(indexed(n), DataLoaderOptions(5).shuffle(true).seed(seed).shard(r, w));
    std::vector<std::vector<int64_t>> out;
    for (int e = 0; e < epochs; ++e) out.push_back(flat(epoch(l)));
    return out;
  };
  const auto a = shard(0, 7, 2), again = shard(0, 7, 2), other_seed = shard(0, 8, 2);
  EXPECT_EQ(a, again);                // the same seed gives the same shards on every run
  EXPECT_NE(a[0], other_seed[0]);     // another seed, another order
  EXPECT_NE(a[0], a[1]);              // a fresh order every epoch
  std::vector<int64_t> strided;       // not the unshuffled shard 0, 2, 4, ...
  for (int64_t i = 0; i < n; i += w) strided.push_back(i);
  EXPECT_NE(a[0], strided);
  // The global generator does not enter a seeded loader: reseeding it changes nothing.
  manual_seed(123);
  const auto b = shard(0, 7, 1);
  manual_seed(456);
  EXPECT_EQ(shard(0, 7, 1), b);
}

TEST(DistributedSampler, AnyRankResumesFromRankZerosState) {
  const int64_t n = 30, w = 3;
  auto opts = [&](int64_t r) { return DataLoaderOptions(2).shuffle(true).seed(9).shard(r, w); };
  DataLoader<TensorDataset> rank0(indexed(n), opts(0)), rank1(indexed(n), opts(1)),
      rank1_resumed(indexed(n), opts(1));
  epoch(rank0), epoch(rank1);  // one whole epoch, then two batches into the next
  std::vector<std::vector<int64_t>> rest;
  for (auto* l : {&rank0, &rank1}) {
    int taken = 0;
    for (const auto& b : *l) {
      (void)b;
      if (++taken == 2) break;
    }
  }
  const StateDict saved = rank0.state_dict();
  EXPECT_EQ(saved.numbers.at("world_size"), 3);
  rank1_resumed.load_state_dict(saved);
  EXPECT_EQ(epoch(rank1_resumed), epoch(rank1));  // the rest of epoch 1, this rank's share
  EXPECT_EQ(epoch(rank1_resumed), epoch(rank1));  // and epoch 2

  // A state from another world size (or none at all) does not fit.
  DataLoader<TensorDataset> two(indexed(n), DataLoaderOptions(2).shuffle(true).seed(9).shard(0, 2));
  EXPECT_THROW(two.load_state_dict(saved), CheckpointError);
  DataLoader<TensorDataset> single(indexed(n), DataLoaderOptions(2).shuffle(true).seed(9));
  EXPECT_THROW(single.load_state_dict(saved), CheckpointError);
  // An unsharded state has no world_size key, as before sharding existed.
  EXPECT_EQ(single.state_dict().numbers.count("world_size"), 0u);
}

TEST(DistributedSampler, RejectsBadShards) {
  const auto ds = indexed(10);
  EXPECT_THROW(DataLoader<TensorDataset>(ds, DataLoaderOptions(2).shard(2, 2)), ValueError);
  EXPECT_THROW(DataLoader<TensorDataset>(ds, DataLoaderOptions(2).shard(-1, 2)), ValueError);
  EXPECT_THROW(DataLoader<TensorDataset>(ds, DataLoaderOptions(2).shard(0, 0)), ValueError);
  // Without a seed each rank would shuffle with its own global generator.
  try {
    DataLoader<TensorDataset>(ds, DataLoaderOptions(2).shuffle(true).shard(0, 2));
    ADD_FAILURE() << "expected tg::ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("seed"), std::string::npos) << e.what();
  }
  // More ranks than samples: every rank gets an empty epoch, and they all agree on it.
  DataLoader<TensorDataset> tiny(indexed(3), DataLoaderOptions(2).shard(3, 4));
  EXPECT_EQ(tiny.num_batches(), 0);
  EXPECT_TRUE(epoch(tiny).empty());
}
