#pragma once
// tg::distributed: data-parallel training across processes and machines, over MPI.
//
// Optional: the library tapegrad::distributed exists when CMake found MPI (TAPEGRAD_MPI, AUTO
// by default); linking it defines TAPEGRAD_HAS_DISTRIBUTED. The core library never links MPI,
// and this header does not include <mpi.h>.
//
//   int main(int argc, char** argv) {
//     tg::distributed::Guard mpi(argc, argv);                 // MPI_Init ... MPI_Finalize
//     namespace dist = tg::distributed;
//     tg::manual_seed(0);
//     auto model = std::make_shared<Net>();
//     dist::DistributedDataParallel ddp(model);             // broadcasts rank 0's weights
//     tg::optim::AdamW opt(model->parameters(), tg::optim::AdamWOptions(1e-3));
//     tg::data::DataLoader loader(ds, tg::data::DataLoaderOptions(8).shuffle(true).seed(1)
//                                         .shard(dist::rank(), dist::world_size()));
//     for (const auto& batch : loader) {
//       opt.zero_grad();
//       loss_of(*model, batch).backward();
//       ddp.sync_gradients();                                 // average across ranks
//       opt.step();
//     }
//     if (dist::rank() == 0) std::cout << ...;
//   }
//
// Run with `mpirun -np 2 ./train` (see README, "Distributed training"). Every rank runs the
// same program; each sees 1/N of every epoch, gradients are averaged, so N ranks at batch b
// step exactly like one process at batch N*b (up to float rounding).
//
// Every collective here must be called by all ranks in the same order. Errors (a failed MPI
// call, ranks that disagree) throw tg::DistributedError; where ranks disagree, every rank
// throws, so none is left waiting in a collective.
//
// Legend: W = world size (number of ranks), r = this rank, P = parameters of a module.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tapegrad/arg.h"
#include "tapegrad/error.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/tensor.h"

namespace tg {

class Checkpoint;

/// A failed MPI call, a collective used before init, or ranks that disagree (different
/// models, diverged parameters).
class DistributedError : public Error { using Error::Error; };

namespace distributed {

// ---- the process group ---------------------------------------------------------------------

/// Initializes MPI (if the program has not already) and the library's communicator, a
/// duplicate of MPI_COMM_WORLD. Calling it again does nothing.
void init(int& argc, char**& argv);
void init();
/// Frees the communicator and finalizes MPI if init() initialized it. Safe to call twice.
void finalize();
bool is_initialized();

/// init() on construction, finalize() on destruction.
class Guard {
 public:
  Guard(int& argc, char**& argv) { init(argc, argv); }
  Guard() { init(); }
  ~Guard() { finalize(); }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
};

/// This process's rank in [0, W). tg::DistributedError before init().
int rank();
/// W, the number of processes.
int world_size();
/// rank() == 0: the rank that prints, logs and writes files.
inline bool is_main() { return rank() == 0; }
/// The host this rank runs on (MPI_Get_processor_name).
std::string processor_name();

void barrier();

// ---- collectives on float buffers and tensors -----------------------------------------------

enum class ReduceOp { Sum, Average };

/// In place, on every rank: data[i] = Σ_ranks data[i] (Average: / W). Any count (split into
/// messages of at most 2^30 floats).
void allreduce(float* data, int64_t count, ReduceOp op = ReduceOp::Sum);
/// In place on the tensor's values (no gradient is recorded).
void allreduce(const Tensor& t, ReduceOp op = ReduceOp::Sum);
/// Sum of one double across ranks (losses, counts, metrics).
double allreduce(double value, ReduceOp op = ReduceOp::Sum);

/// Copies root's data to every rank.
void broadcast(float* data, int64_t count, int root = 0);
void broadcast(const Tensor& t, int root = 0);
/// Copies root's bytes to every rank; `bytes` is resized on the receivers.
void broadcast(std::string& bytes, int root = 0);

/// Copies root's parameters and buffers (module.named_state()) into every rank's module,
/// packed into one message per `bucket_bytes`. First checks that every rank's module has the
/// same names and shapes (tg::DistributedError on every rank naming the first difference).
void broadcast_state(nn::Module& module, int root = 0, int64_t bucket_bytes = 25 << 20);

/// Throws tg::DistributedError (on every rank) unless the module's parameters and buffers
/// are bitwise identical on all ranks. Cheap: one CRC-32 per tensor, one small allgather.
/// The message names the first tensor that differs and the ranks that disagree with rank 0.
void verify_state(const nn::Module& module);

// ---- checkpoints -----------------------------------------------------------------------------

/// Rank 0 writes `ck` (Checkpoint::save: atomic); all ranks return once the file is complete.
/// If the write fails every rank throws tg::IOError with rank 0's message.
void save_checkpoint(const Checkpoint& ck, const std::string& path);
/// Rank 0 reads and validates the file and broadcasts it, so every rank resumes from the
/// same bytes even when the file exists only on rank 0's machine. Errors are thrown on
/// every rank (tg::CheckpointError / tg::IOError with rank 0's message).
Checkpoint load_checkpoint(const std::string& path);

// ---- gradient averaging ------------------------------------------------------------------------

struct DDPOptions {
  /// Gradients travel in buckets of at most this many bytes (a parameter larger than that
  /// gets a bucket of its own). PyTorch's default, 25 MiB; smaller buckets mean more,
  /// shorter messages.
  TG_ARG(int64_t, bucket_bytes) = 25 << 20;
  /// Copy rank 0's parameters and buffers to every rank when the wrapper is built.
  TG_ARG(bool, broadcast_on_init) = true;
  /// Every n-th sync_gradients() first checks that parameters are identical on all ranks
  /// (verify_state); 0 = never.
  TG_ARG(int64_t, verify_every) = 0;
};

/// Data parallelism for one module: every rank holds a replica; after backward,
/// sync_gradients() replaces each gradient with its mean over the ranks, so identical
/// optimizers keep the replicas identical.
///
/// Gradients are packed into contiguous buckets (parameters in registration order) and each
/// bucket is one allreduce. A parameter that has no gradient on some ranks (unused in their
/// forward) counts as zero there; one that has no gradient on any rank keeps none, so the
/// optimizer skips it as in a single process. Parameters that do not require grad (frozen)
/// are left out.
class DistributedDataParallel {
 public:
  /// A contiguous run of parameters travelling as one message.
  struct Bucket {
    std::vector<int64_t> params;  // indices into parameters()
    int64_t numel = 0;            // floats of gradient in the bucket
  };

  /// tg::DistributedError before init(); broadcasts rank 0's state unless told not to.
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                   const DDPOptions& options = DDPOptions());

  nn::Module& module() { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  /// The parameters that take part (requires_grad), in registration order.
  const std::vector<std::pair<std::string, Tensor>>& parameters() const { return params_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }

  /// Call on every rank after backward and before the optimizer step: each gradient becomes
  /// the mean over ranks. Counts its calls for verify_every.
  void sync_gradients();
  /// rank 0's parameters and buffers to every rank.
  void broadcast_state() { distributed::broadcast_state(*module_, 0, options_.bucket_bytes()); }
  /// tg::DistributedError on every rank unless all replicas are bitwise identical.
  void verify_state() const { distributed::verify_state(*module_); }

  int64_t num_syncs() const { return syncs_; }

 private:
  std::shared_ptr<nn::Module> module_;
  DDPOptions options_;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<Bucket> buckets_;
  std::vector<float> staging_;  // the largest bucket, plus one presence flag per parameter
  int64_t syncs_ = 0;
};

/// The bucket plan for tensors of these sizes (floats): consecutive runs of at most
/// bucket_bytes, a tensor larger than that alone. Exposed for tests.
std::vector<DistributedDataParallel::Bucket> plan_buckets(const std::vector<int64_t>& numels,
                                                          int64_t bucket_bytes);

}  // namespace distributed
}  // namespace tg
