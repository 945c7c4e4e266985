#pragma once
// The examples' --distributed flag: data parallelism over MPI (tapegrad::distributed), or a
// single process when the flag is off. Run the example under `mpirun -np N ... --distributed`.
//
//   ex::Parallel par(cfg.distributed);        // MPI_Init; stdout silenced on ranks other than 0
//   par.wrap(model);                          // rank 0's weights on every rank
//   Loader loader(ds, par.shard(DataLoaderOptions(B).shuffle(true).seed(s)));   // 1/N per rank
//   ... loss.backward(); par.sync_gradients(); opt.step();                       // mean grads
//   par.save(ck, path);                       // rank 0 writes, every rank waits
//   if (!par.is_main()) return 0;             // evaluation, plots, ... on rank 0 only
//
// Off, every call is a no-op (or the plain single-process version). On, in a build without
// MPI, the constructor throws tg::ValueError.
#include <memory>
#include <string>

#include "tapegrad/checkpoint.h"
#include "tapegrad/data.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/state_dict.h"

namespace ex {

class Parallel {
 public:
  explicit Parallel(bool on);
  ~Parallel();
  Parallel(const Parallel&) = delete;
  Parallel& operator=(const Parallel&) = delete;

  /// True if this build has tapegrad::distributed (MPI).
  static bool available();
  bool on() const { return on_; }
  int rank() const { return rank_; }
  int world_size() const { return world_; }
  bool is_main() const { return rank_ == 0; }

  /// Copies rank 0's parameters and buffers to every rank; sync_gradients then averages this
  /// model's gradients.
  void wrap(const std::shared_ptr<tg::nn::Module>& model);
  void sync_gradients();
  /// The options with this rank's shard of every epoch (unchanged when off).
  tg::data::DataLoaderOptions shard(tg::data::DataLoaderOptions options) const;
  /// Rank 0 writes; errors reach every rank.
  void save(const tg::Checkpoint& ck, const std::string& path) const;
  /// Rank 0 reads the file and sends it to every rank.
  tg::Checkpoint load(const std::string& path) const;
  /// The mean of a value over the ranks (a metric); the value itself when off.
  double mean(double value) const;
  /// Every rank's global generator (dropout draws differ between ranks), gathered for rank
  /// 0's checkpoint: strings "type" = "RankGenerators"; numbers "world_size" and
  /// "rank.<r>.s<k>.hi" / ".lo" (the 32-bit halves of state word k). Collective.
  tg::StateDict rng_state_dict() const;
  /// Sets this rank's global generator from such a state; tg::CheckpointError if it was saved
  /// with another number of ranks.
  void load_rng_state_dict(const tg::StateDict& state) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool on_ = false;
  int rank_ = 0;
  int world_ = 1;
};

}  // namespace ex
