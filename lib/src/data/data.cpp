// tg::data: datasets and the batch sampler behind DataLoader.
#include "tapegrad/data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "tapegrad/random.h"

namespace tg {
namespace data {

namespace {
void check_indices(const std::vector<int64_t>& indices, int64_t n, const char* where) {
  for (int64_t i : indices)
    if (i < 0 || i >= n)
      throw IndexError(std::string(where) + ": sample index " + std::to_string(i) +
                       " out of range for " + std::to_string(n) + " samples");
}
}  // namespace

// ---- TensorDataset ----------------------------------------------------------------------------

TensorDataset::TensorDataset(std::vector<Tensor> tensors, Indices targets)
    : tensors_(std::move(tensors)), targets_(std::move(targets)) {
  if (tensors_.empty() && targets_.shape.empty())
    throw ValueError("TensorDataset: no tensors and no targets");
  bool first = true;
  auto agree = [&](int64_t n, const std::string& what) {
    if (first) size_ = n, first = false;
    else if (n != size_)
      throw ShapeError("TensorDataset: " + what + " has " + std::to_string(n) +
                       " samples (first dim), expected " + std::to_string(size_));
  };
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const Tensor& t = tensors_[k];
    if (!t.defined()) throw ValueError("TensorDataset: tensor " + std::to_string(k) + " is undefined");
    if (t.dim() == 0)
      throw ShapeError("TensorDataset: tensor " + std::to_string(k) +
                       " is 0-d; the first dim must be the sample dim");
    agree(t.size(0), "tensor " + std::to_string(k) + " of shape " + to_string(t.shape()));
  }
  if (!targets_.shape.empty()) agree(targets_.shape[0], "targets of shape " + to_string(targets_.shape));
}

TensorBatch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  check_indices(indices, size_, "TensorDataset::get_batch");
  const int64_t b = static_cast<int64_t>(indices.size());
  TensorBatch batch;
  for (const auto& t : tensors_) {
    Shape shape = t.shape();
    int64_t row = 1;  // values per sample (not numel / N: N may be 0)
    for (size_t d = 1; d < shape.size(); ++d) row *= shape[d];
    shape[0] = b;
    Tensor out = zeros(shape);
    const float* src = t.data_ptr();
    float* dst = out.data_ptr();
    if (row > 0)  // empty rows: no data pointers to copy between
      for (int64_t i = 0; i < b; ++i)
        std::memcpy(dst + i * row, src + indices[i] * row, sizeof(float) * row);
    batch.tensors.push_back(out);
  }
  if (!targets_.shape.empty()) {
    Shape shape = targets_.shape;
    const int64_t row = shape[0] ? targets_.numel() / shape[0] : 0;
    shape[0] = b;
    std::vector<int64_t> values(b * row);
    for (int64_t i = 0; i < b; ++i)
      std::copy_n(targets_.values.begin() + indices[i] * row, row, values.begin() + i * row);
    batch.targets = Indices(std::move(values), shape);
  }
  return batch;
}

// ---- SequenceDataset --------------------------------------------------------------------------

SequenceDataset::SequenceDataset(std::vector<std::vector<int64_t>> sequences,
                                 std::vector<int64_t> labels, int64_t pad_id) {
  if (!labels.empty() && labels.size() != sequences.size())
    throw ShapeError("SequenceDataset: " + std::to_string(labels.size()) + " labels for " +
                     std::to_string(sequences.size()) + " sequences");
  data_ = std::make_shared<const Data>(Data{std::move(sequences), std::move(labels), pad_id});
}

const std::vector<int64_t>& SequenceDataset::sequence(int64_t i) const {
  check_indices({i}, size(), "SequenceDataset::sequence");
  return data_->sequences[i];
}

SequenceBatch SequenceDataset::get_batch(const std::vector<int64_t>& indices) const {
  check_indices(indices, size(), "SequenceDataset::get_batch");
  const int64_t b = static_cast<int64_t>(indices.size());
  SequenceBatch batch;
  int64_t t_max = 0;
  for (int64_t i : indices) {
    const int64_t len = static_cast<int64_t>(data_->sequences[i].size());
    batch.lengths.push_back(len);
    t_max = std::max(t_max, len);
  }
  std::vector<int64_t> ids(b * t_max, data_->pad_id);
  for (int64_t r = 0; r < b; ++r) {
    const auto& s = data_->sequences[indices[r]];
    std::copy(s.begin(), s.end(), ids.begin() + r * t_max);
  }
  batch.ids = Indices(std::move(ids), {b, t_max});
  if (!data_->labels.empty()) {
    std::vector<int64_t> labels;
    for (int64_t i : indices) labels.push_back(data_->labels[i]);
    batch.labels = Indices(std::move(labels), {b});
  }
  return batch;
}

// ---- BatchSampler -----------------------------------------------------------------------------

BatchSampler::BatchSampler(int64_t num_samples, const DataLoaderOptions& options)
    : n_(num_samples), options_(options) {
  if (options_.batch_size() < 1)
    throw ValueError("DataLoader: batch_size must be >= 1, got " + std::to_string(options_.batch_size()));
  if (n_ < 0) throw ValueError("DataLoader: negative dataset size " + std::to_string(n_));
  const int64_t w = options_.world_size(), r = options_.rank();
  if (w < 1 || r < 0 || r >= w)
    throw ValueError("DataLoader: shard(rank, world_size) needs world_size >= 1 and 0 <= rank < "
                     "world_size, got rank " + std::to_string(r) + ", world_size " + std::to_string(w));
  if (w > 1 && options_.shuffle() && !options_.seed())
    throw ValueError("DataLoader: a sharded loader that shuffles needs seed(s), so that every rank "
                     "draws the same order (the global generator may differ between ranks)");
}

int64_t BatchSampler::num_batches() const {
  const int64_t b = options_.batch_size(), n = num_samples();
  return options_.drop_last() ? n / b : (n + b - 1) / b;
}

void BatchSampler::begin_epoch() {
  if (in_epoch_) return;
  order_.resize(n_);
  for (int64_t i = 0; i < n_; ++i) order_[i] = i;
  if (options_.shuffle()) {
    // Fisher-Yates from the back.
    Generator own(options_.seed() ? *options_.seed() ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(epoch_ + 1)) : 0);
    Generator& gen = options_.seed() ? own : default_generator();
    for (int64_t i = n_ - 1; i > 0; --i)
      std::swap(order_[i], order_[gen.below(static_cast<uint64_t>(i + 1))]);
  }
  batch_ = 0;
  in_epoch_ = true;
  if (num_batches() == 0) {  // nothing to hand out: the epoch is over at once
    in_epoch_ = false;
    ++epoch_;
  }
}

std::vector<int64_t> BatchSampler::next() {
  if (!in_epoch_) throw ValueError("DataLoader: next batch requested outside an epoch");
  const int64_t b = options_.batch_size(), w = options_.world_size();
  const int64_t start = batch_ * b, stop = std::min(num_samples(), start + b);
  std::vector<int64_t> indices;  // positions rank + w * i of the epoch's order (w = 1: all)
  for (int64_t i = start; i < stop; ++i) indices.push_back(order_[i * w + options_.rank()]);
  if (++batch_ == num_batches()) {
    in_epoch_ = false;
    ++epoch_;
    batch_ = 0;
  }
  return indices;
}

StateDict BatchSampler::state_dict() const {
  StateDict d;
  d.strings["type"] = "DataLoader";
  d.numbers["num_samples"] = static_cast<double>(n_);
  d.numbers["batch_size"] = static_cast<double>(options_.batch_size());
  d.numbers["drop_last"] = options_.drop_last() ? 1 : 0;
  d.numbers["shuffle"] = options_.shuffle() ? 1 : 0;
  d.numbers["epoch"] = static_cast<double>(epoch_);
  d.numbers["batch_index"] = static_cast<double>(batch_);
  d.numbers["in_epoch"] = in_epoch_ ? 1 : 0;
  if (options_.world_size() > 1) d.numbers["world_size"] = static_cast<double>(options_.world_size());
  if (in_epoch_ && options_.shuffle()) {
    if (n_ > (int64_t(1) << 24))
      throw ValueError("DataLoader::state_dict: cannot save the permutation of " +
                       std::to_string(n_) + " samples (at most 2^24 fit a float32 tensor)");
    std::vector<float> perm(order_.begin(), order_.end());
    d.tensors["permutation"] = tensor(perm, {n_});
  }
  return d;
}

void BatchSampler::load_state_dict(const StateDict& d) {
  const std::string owner = "DataLoader.load_state_dict";
  auto bad = [&](const std::string& what) { throw CheckpointError(owner + ": " + what); };
  if (d.string_at("type", owner) != "DataLoader")
    bad("key 'type': the state is for a " + d.string_at("type", owner) + ", not a DataLoader");
  auto expect = [&](const char* key, double want, const char* what) {
    const double got = d.number_at(key, owner);
    if (got != want)
      bad(std::string("key '") + key + "': the state is for " + what + " " + std::to_string(got) +
          ", this loader has " + std::to_string(want));
  };
  expect("num_samples", static_cast<double>(n_), "a dataset size of");
  expect("batch_size", static_cast<double>(options_.batch_size()), "a batch size of");
  expect("drop_last", options_.drop_last() ? 1 : 0, "drop_last =");
  expect("shuffle", options_.shuffle() ? 1 : 0, "shuffle =");
  const double world = d.numbers.count("world_size") ? d.number_at("world_size", owner) : 1.0;
  if (world != static_cast<double>(options_.world_size()))
    bad("key 'world_size': the state is for " + std::to_string(world) + " shards, this loader has " +
        std::to_string(options_.world_size()));
  const double epoch = d.number_at("epoch", owner), batch = d.number_at("batch_index", owner),
               in_epoch = d.number_at("in_epoch", owner);
  if (!(epoch >= 0 && std::floor(epoch) == epoch && epoch < 9e15))
    bad("key 'epoch': expected a count, got " + std::to_string(epoch));
  if (in_epoch != 0 && in_epoch != 1) bad("key 'in_epoch': expected 0 or 1, got " + std::to_string(in_epoch));
  const double limit = in_epoch ? static_cast<double>(num_batches()) : 1.0;
  if (!(batch >= 0 && std::floor(batch) == batch && batch < limit))
    bad("key 'batch_index': expected an integer in [0, " + std::to_string(static_cast<int64_t>(limit)) +
        "), got " + std::to_string(batch));
  std::vector<int64_t> order(n_);
  for (int64_t i = 0; i < n_; ++i) order[i] = i;
  const bool want_perm = in_epoch && options_.shuffle();
  auto it = d.tensors.find("permutation");
  if (want_perm) {
    if (it == d.tensors.end()) bad("missing tensor key 'permutation'");
    const Tensor& p = it->second;
    if (!p.defined() || p.shape() != Shape{n_})
      bad("key 'permutation': expected shape " + to_string({n_}) + ", got " +
          (p.defined() ? to_string(p.shape()) : std::string("undefined")));
    std::vector<char> seen(n_, 0);
    const float* v = p.data_ptr();
    for (int64_t i = 0; i < n_; ++i) {
      const double x = v[i];
      if (!(x >= 0 && x < n_ && std::floor(x) == x) || seen[static_cast<int64_t>(x)])
        bad("key 'permutation': element " + std::to_string(i) + " (" + std::to_string(x) +
            ") breaks the permutation of 0.." + std::to_string(n_ - 1));
      seen[static_cast<int64_t>(x)] = 1;
      order[i] = static_cast<int64_t>(x);
    }
  } else if (it != d.tensors.end()) {
    bad("unexpected tensor key 'permutation' (the state is not inside a shuffled epoch)");
  }
  epoch_ = static_cast<int64_t>(epoch);
  batch_ = static_cast<int64_t>(batch);
  in_epoch_ = in_epoch != 0;
  order_ = std::move(order);
}

}  // namespace data
}  // namespace tg
