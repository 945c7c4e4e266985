// tg::data: datasets, batching, shuffling under a seed, padding, and resuming mid-epoch.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "tapegrad/data.h"
#include "tapegrad/random.h"
#include "tapegrad/tapegrad.h"

using namespace tg;
using namespace tg::data;

namespace {

/// x (10, 2) with x[i] = (i, -i); targets i % 3.
TensorDataset ten() {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int i = 0; i < 10; ++i) {
    x.push_back(static_cast<float>(i));
    x.push_back(static_cast<float>(-i));
    y.push_back(i % 3);
  }
  return TensorDataset({tensor(x, {10, 2})}, Indices(y, {10}));
}

/// The sample ids of every batch of one epoch (read back from column 0).
std::vector<std::vector<int64_t>> epoch_ids(DataLoader<TensorDataset>& loader) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& batch : loader) {
    std::vector<int64_t> ids;
    for (int64_t r = 0; r < batch.tensors[0].size(0); ++r)
      ids.push_back(static_cast<int64_t>(batch.tensors[0].data()(r, 0)));
    out.push_back(ids);
  }
  return out;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> v;
  for (const auto& b : batches) v.insert(v.end(), b.begin(), b.end());
  return v;
}

}  // namespace

TEST(Data, TensorDatasetBatchesInOrder) {
  DataLoader loader(ten(), DataLoaderOptions(3));
  EXPECT_EQ(loader.num_batches(), 4);
  std::vector<int64_t> sizes;
  int64_t seen = 0;
  for (const auto& batch : loader) {
    const int64_t b = batch.tensors[0].size(0);
    sizes.push_back(b);
    ASSERT_EQ(batch.tensors[0].shape(), (Shape{b, 2}));
    ASSERT_EQ(batch.targets.shape, (Shape{b}));
    for (int64_t r = 0; r < b; ++r) {
      EXPECT_EQ(batch.tensors[0].data()(r, 0), static_cast<float>(seen));
      EXPECT_EQ(batch.tensors[0].data()(r, 1), -static_cast<float>(seen));
      EXPECT_EQ(batch.targets.values[r], seen % 3);
      ++seen;
    }
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(loader.epoch(), 1);
}

TEST(Data, DropLast) {
  DataLoader loader(ten(), DataLoaderOptions(3).drop_last(true));
  EXPECT_EQ(loader.num_batches(), 3);
  const auto batches = epoch_ids(loader);
  ASSERT_EQ(batches.size(), 3u);
  for (const auto& b : batches) EXPECT_EQ(b.size(), 3u);
  // Fewer samples than one batch: an epoch with no batches still ends.
  DataLoader small(ten(), DataLoaderOptions(11).drop_last(true));
  EXPECT_EQ(epoch_ids(small).size(), 0u);
  EXPECT_EQ(small.epoch(), 1);
  DataLoader whole(ten(), DataLoaderOptions(11));
  EXPECT_EQ(epoch_ids(whole), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}));
}

TEST(Data, ShuffleIsAPermutationGovernedByTheSeed) {
  auto run = [](uint64_t seed) {
    manual_seed(seed);
    DataLoader loader(ten(), DataLoaderOptions(4).shuffle(true));
    auto e0 = flat(epoch_ids(loader));
    auto e1 = flat(epoch_ids(loader));
    return std::make_pair(e0, e1);
  };
  const auto a = run(7), b = run(7), c = run(8);
  EXPECT_EQ(a, b);                 // same global seed, same order
  EXPECT_NE(a.first, c.first);     // another seed, another order
  EXPECT_NE(a.first, a.second);    // a fresh permutation each epoch
  for (const auto& e : {a.first, a.second}) {
    std::vector<int64_t> sorted = e;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> all(10);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(sorted, all);
  }
}

TEST(Data, ExplicitSeedIgnoresTheGlobalGenerator) {
  manual_seed(1);
  DataLoader x(ten(), DataLoaderOptions(4).shuffle(true).seed(42));
  const auto x0 = flat(epoch_ids(x)), x1 = flat(epoch_ids(x));
  manual_seed(2);
  const auto before = default_generator().state();
  DataLoader y(ten(), DataLoaderOptions(4).shuffle(true).seed(42));
  EXPECT_EQ(flat(epoch_ids(y)), x0);
  EXPECT_EQ(flat(epoch_ids(y)), x1);
  EXPECT_EQ(default_generator().state(), before);  // not consumed
  EXPECT_NE(x0, x1);
  DataLoader z(ten(), DataLoaderOptions(4).shuffle(true).seed(43));
  EXPECT_NE(flat(epoch_ids(z)), x0);
}

TEST(Data, SequencesArePaddedToTheLongestInTheBatch) {
  SequenceDataset ds({{5, 6, 7}, {1}, {2, 3}, {}, {4, 4, 4, 4}}, {0, 1, 0, 1, 1}, /*pad_id=*/9);
  DataLoader loader(ds, DataLoaderOptions(3));
  std::vector<SequenceBatch> batches;
  for (const auto& b : loader) batches.push_back(b);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].ids.shape, (Shape{3, 3}));
  EXPECT_EQ(batches[0].ids.values, (std::vector<int64_t>{5, 6, 7, 1, 9, 9, 2, 3, 9}));
  EXPECT_EQ(batches[0].lengths, (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(batches[0].labels.values, (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(batches[1].ids.shape, (Shape{2, 4}));
  EXPECT_EQ(batches[1].ids.values, (std::vector<int64_t>{9, 9, 9, 9, 4, 4, 4, 4}));
  EXPECT_EQ(batches[1].lengths, (std::vector<int64_t>{0, 4}));
  // Without labels.
  SequenceDataset unlabeled({{1, 2}, {3}});
  auto b = unlabeled.get_batch({1, 0});
  EXPECT_EQ(b.ids.values, (std::vector<int64_t>{3, 0, 1, 2}));
  EXPECT_TRUE(b.labels.values.empty());
}

TEST(Data, BadInput) {
  EXPECT_THROW(TensorDataset({zeros({3, 2}), zeros({4})}), ShapeError);
  EXPECT_THROW(TensorDataset({zeros({3, 2})}, Indices({0, 1})), ShapeError);
  EXPECT_THROW(TensorDataset({scalar(1.0f)}), ShapeError);
  EXPECT_THROW(SequenceDataset({{1}, {2}}, {0}), ShapeError);
  EXPECT_THROW(DataLoader(ten(), DataLoaderOptions(0)), ValueError);
  EXPECT_THROW(ten().get_batch({10}), IndexError);
  EXPECT_THROW(SequenceDataset(std::vector<std::vector<int64_t>>{{1}}).get_batch({-1}), IndexError);
}

TEST(Data, BreakingOffContinuesTheSameEpoch) {
  DataLoader loader(ten(), DataLoaderOptions(4));
  for (const auto& b : loader) {
    (void)b;
    break;
  }
  EXPECT_EQ(loader.epoch(), 0);
  EXPECT_EQ(loader.batch_index(), 1);
  EXPECT_EQ(epoch_ids(loader), (std::vector<std::vector<int64_t>>{{4, 5, 6, 7}, {8, 9}}));
  EXPECT_EQ(loader.epoch(), 1);
}

TEST(Data, ResumesMidEpoch) {
  // Reference run: epoch 0, two batches of epoch 1, then the rest of epoch 1 and epoch 2.
  manual_seed(3);
  DataLoader a(ten(), DataLoaderOptions(3).shuffle(true));
  epoch_ids(a);
  std::vector<std::vector<int64_t>> head;
  StateDict saved;
  Generator::State gen_state{};
  for (const auto& batch : a) {
    head.push_back({static_cast<int64_t>(batch.tensors[0].data()(0, 0))});
    if (head.size() == 2) {  // a checkpoint inside the loop, after two batches
      saved = a.state_dict();
      gen_state = default_generator().state();
      break;
    }
  }
  const auto rest1 = epoch_ids(a), next = epoch_ids(a);
  EXPECT_EQ(saved.numbers.at("epoch"), 1.0);
  EXPECT_EQ(saved.numbers.at("batch_index"), 2.0);
  EXPECT_EQ(saved.tensors.at("permutation").shape(), (Shape{10}));

  // A fresh loader (after a different seed) restored from the state continues identically.
  manual_seed(99);
  DataLoader b(ten(), DataLoaderOptions(3).shuffle(true));
  b.load_state_dict(saved);
  default_generator().set_state(gen_state);
  EXPECT_EQ(b.epoch(), 1);
  EXPECT_EQ(b.batch_index(), 2);
  EXPECT_EQ(epoch_ids(b), rest1);
  EXPECT_EQ(rest1.size(), 2u);
  EXPECT_EQ(epoch_ids(b), next);
}

TEST(Data, StateThatDoesNotFitIsRejected) {
  manual_seed(3);
  DataLoader a(ten(), DataLoaderOptions(3).shuffle(true));
  for (const auto& b : a) {
    (void)b;
    break;
  }
  const StateDict good = a.state_dict();
  auto rejected = [&](const std::function<void(StateDict&)>& corrupt, const std::string& word) {
    StateDict bad = good;
    corrupt(bad);
    DataLoader target(ten(), DataLoaderOptions(3).shuffle(true));
    const StateDict before = target.state_dict();
    try {
      target.load_state_dict(bad);
      ADD_FAILURE() << "no error for " << word;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
    EXPECT_EQ(target.state_dict().numbers, before.numbers);
  };
  rejected([](StateDict& d) { d.numbers["num_samples"] = 11; }, "num_samples");
  rejected([](StateDict& d) { d.numbers["batch_size"] = 4; }, "batch_size");
  rejected([](StateDict& d) { d.numbers["batch_index"] = 4; }, "batch_index");
  rejected([](StateDict& d) {
             Tensor p = d.tensors["permutation"].clone();  // copies of a StateDict share tensors
             p.data()[0] = p.data()[1];
             d.tensors["permutation"] = p;
           },
           "permutation");
  rejected([](StateDict& d) { d.tensors["permutation"] = zeros({9}); }, "permutation");
  rejected([](StateDict& d) { d.tensors.erase("permutation"); }, "permutation");
  rejected([](StateDict& d) { d.strings["type"] = "Adam"; }, "type");
  // Another dataset with the same size and options is fine: the position is about indices.
  DataLoader other(ten(), DataLoaderOptions(3).shuffle(true));
  EXPECT_NO_THROW(other.load_state_dict(good));
}
