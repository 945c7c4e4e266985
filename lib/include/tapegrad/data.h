#pragma once
// tg::data: batching in-memory datasets.
//
//   tg::data::TensorDataset ds({x}, y);                  // x (N, C), targets y (N)
//   tg::data::DataLoader loader(ds, tg::data::DataLoaderOptions(32).shuffle(true));
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (const auto& batch : loader)                   // batch.tensors[0] (B, C), batch.targets (B)
//       ...
//
// A dataset is any class with `int64_t size() const`, a `Batch` type and
// `Batch get_batch(const std::vector<int64_t>& indices) const`; datasets are cheap to copy
// (they share their data).
//
// Shuffling draws a fresh permutation at the start of every epoch: from the global generator
// (so tg::manual_seed governs it) or, if DataLoaderOptions::seed is set, from a generator
// seeded with (seed, epoch), independent of everything else. The loader's position (epoch,
// next batch, permutation) is a tg::StateDict, so a checkpoint can resume mid-epoch: the
// loop after load_state_dict continues with the next batch of the saved epoch.
//
// Legend: N = samples in the dataset, B = batch, T = longest sequence in the batch.
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "tapegrad/arg.h"
#include "tapegrad/state_dict.h"
#include "tapegrad/tensor.h"

namespace tg {
namespace data {

// ---- datasets ---------------------------------------------------------------------------

struct TensorBatch {
  std::vector<Tensor> tensors;  // each (B, ...): the rows of the dataset's tensors
  Indices targets;              // (B, ...) if the dataset has targets, else empty
};

/// Tensors (and optionally integer targets) whose first dim is the sample dim.
class TensorDataset {
 public:
  using Batch = TensorBatch;
  /// Every tensor (N, ...) and targets (N, ...) must agree on N (tg::ShapeError otherwise).
  explicit TensorDataset(std::vector<Tensor> tensors, Indices targets = Indices());
  int64_t size() const { return size_; }
  /// Copies the rows `indices` of every tensor (no gradient is recorded).
  Batch get_batch(const std::vector<int64_t>& indices) const;
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  Indices targets_;
  int64_t size_ = 0;
};

struct SequenceBatch {
  Indices ids;                   // (B, T), padded with pad_id after each sequence
  std::vector<int64_t> lengths;  // (B): each sequence's length before padding
  Indices labels;                // (B), or empty if the dataset has no labels
};

/// Sequences of token ids of any lengths, each with an integer label (or none). Batches are
/// padded to their longest sequence.
class SequenceDataset {
 public:
  using Batch = SequenceBatch;
  /// labels: one per sequence, or empty for none (tg::ShapeError on a count mismatch).
  SequenceDataset(std::vector<std::vector<int64_t>> sequences, std::vector<int64_t> labels = {},
                  int64_t pad_id = 0);
  int64_t size() const { return static_cast<int64_t>(data_->sequences.size()); }
  Batch get_batch(const std::vector<int64_t>& indices) const;
  int64_t pad_id() const { return data_->pad_id; }
  const std::vector<int64_t>& sequence(int64_t i) const;

 private:
  struct Data {
    std::vector<std::vector<int64_t>> sequences;
    std::vector<int64_t> labels;
    int64_t pad_id;
  };
  std::shared_ptr<const Data> data_;
};

// ---- the loader ----------------------------------------------------------------------------

struct DataLoaderOptions {
  explicit DataLoaderOptions(int64_t batch_size = 1) : batch_size_(batch_size) {}
  /// Data parallelism: this loader yields only rank `rank`'s share of every epoch, the samples
  /// at positions rank, rank + world_size, rank + 2 world_size, ... of the epoch's order
  /// (which every rank draws alike: shuffling then needs seed()). The last N mod world_size
  /// samples of each epoch's order are left out, so every rank gets N / world_size samples and
  /// takes the same number of steps. With batch b, the ranks' k-th batches together are
  /// exactly the k-th batch of an unsharded loader with batch world_size * b.
  DataLoaderOptions& shard(int64_t rank, int64_t world_size) {
    rank_ = rank, world_size_ = world_size;
    return *this;
  }
  /// The shard set by shard(): this loader's rank, and how many there are.
  int64_t rank() const noexcept { return rank_; }
  int64_t world_size() const noexcept { return world_size_; }

  TG_ARG(int64_t, batch_size);
  TG_ARG(bool, shuffle) = false;
  /// Drop the last batch of an epoch if it is smaller than batch_size.
  TG_ARG(bool, drop_last) = false;
  /// Shuffle from a generator of its own, seeded with (seed, epoch).
  TG_ARG(std::optional<uint64_t>, seed);

 private:
  int64_t rank_ = 0;
  int64_t world_size_ = 1;
};

/// Which samples make each batch: the part of a loader that does not depend on the dataset.
class BatchSampler {
 public:
  BatchSampler(int64_t num_samples, const DataLoaderOptions& options);
  int64_t num_batches() const;
  /// Starts an epoch (drawing its permutation), unless one is in progress (e.g. resumed).
  void begin_epoch();
  bool in_epoch() const { return in_epoch_; }
  /// The sample indices of the next batch; the epoch ends when the last one is taken.
  std::vector<int64_t> next();
  /// The current epoch (the next one between epochs), counted from 0.
  int64_t epoch() const { return epoch_; }
  /// The index of the next batch within the epoch.
  int64_t batch_index() const { return batch_; }
  /// The samples this loader hands out per epoch: N, or N / world_size when sharded.
  int64_t num_samples() const { return n_ / options_.world_size(); }

  /// strings "type" = "DataLoader"; numbers "num_samples", "batch_size", "drop_last",
  /// "shuffle", "epoch", "batch_index", "in_epoch", and "world_size" when sharded; tensors
  /// "permutation" (while in an epoch with shuffling; float32, so at most 2^24 samples). The
  /// state holds the whole epoch's order, not the rank, so every rank can resume from rank
  /// 0's state.
  StateDict state_dict() const;
  /// tg::CheckpointError if the state is for another dataset size or batch size, or the
  /// permutation is not one; nothing changes then.
  void load_state_dict(const StateDict& dict);

 private:
  int64_t n_;
  DataLoaderOptions options_;
  int64_t epoch_ = 0;
  int64_t batch_ = 0;
  bool in_epoch_ = false;
  std::vector<int64_t> order_;  // this epoch's sample order
};

template <class Dataset>
class DataLoader {
 public:
  using Batch = typename Dataset::Batch;

  DataLoader(Dataset dataset, const DataLoaderOptions& options)
      : dataset_(std::move(dataset)), sampler_(dataset_.size(), options) {}

  /// An input iterator over one epoch; each increment takes the next batch.
  class Iterator {
   public:
    Iterator() = default;
    explicit Iterator(DataLoader* loader) : loader_(loader) { advance(); }
    const Batch& operator*() const { return batch_; }
    const Batch* operator->() const { return &batch_; }
    Iterator& operator++() { advance(); return *this; }
    bool operator==(const Iterator& o) const { return loader_ == o.loader_; }
    bool operator!=(const Iterator& o) const { return loader_ != o.loader_; }

   private:
    void advance() {
      if (loader_ && loader_->sampler_.in_epoch())
        batch_ = loader_->dataset_.get_batch(loader_->sampler_.next());
      else
        loader_ = nullptr;
    }
    DataLoader* loader_ = nullptr;
    Batch batch_;
  };

  /// Starts an epoch, or continues one left unfinished (resumed, or a loop that broke off).
  Iterator begin() {
    sampler_.begin_epoch();
    return Iterator(this);
  }
  Iterator end() { return Iterator(); }

  int64_t num_batches() const { return sampler_.num_batches(); }
  int64_t epoch() const { return sampler_.epoch(); }
  int64_t batch_index() const { return sampler_.batch_index(); }
  const Dataset& dataset() const { return dataset_; }
  StateDict state_dict() const { return sampler_.state_dict(); }
  void load_state_dict(const StateDict& dict) { sampler_.load_state_dict(dict); }

 private:
  Dataset dataset_;
  BatchSampler sampler_;
};

}  // namespace data
}  // namespace tg
