#include "common/parallel.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tapegrad/error.h"
#ifdef TAPEGRAD_HAS_DISTRIBUTED
#include "tapegrad/distributed.h"
#endif

namespace ex {

namespace {
/// Under mpirun without --distributed every process would train alone on all the data and
/// write the same files: refuse.
void check_not_launched_in_parallel(bool on) {
  if (on) return;
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(var);
    if (v && std::atoi(v) > 1)
      throw tg::ValueError(std::string("started by mpirun with ") + v + " processes (" + var +
                           ") but without --distributed: each would train alone and write the "
                           "same files; add --distributed");
  }
}
}  // namespace

#ifdef TAPEGRAD_HAS_DISTRIBUTED
namespace dist = tg::distributed;

struct Parallel::Impl {
  std::unique_ptr<dist::DistributedDataParallel> ddp;
};

bool Parallel::available() { return true; }

Parallel::Parallel(bool on) : impl_(std::make_unique<Impl>()), on_(on) {
  check_not_launched_in_parallel(on_);
  if (!on_) return;
  dist::init();
  rank_ = dist::rank();
  world_ = dist::world_size();
  // Only rank 0 prints: the others' stdout goes nowhere (errors still reach stderr).
  if (rank_ != 0 && !std::freopen("/dev/null", "w", stdout))
    throw tg::IOError("--distributed: cannot silence stdout on rank " + std::to_string(rank_));
}

Parallel::~Parallel() {
  if (!on_) return;
  impl_->ddp.reset();
  dist::finalize();
}

void Parallel::wrap(const std::shared_ptr<tg::nn::Module>& model) {
  if (on_) impl_->ddp = std::make_unique<dist::DistributedDataParallel>(model);
}

void Parallel::sync_gradients() {
  if (!on_) return;
  if (!impl_->ddp) throw tg::ValueError("Parallel::sync_gradients before wrap(model)");
  impl_->ddp->sync_gradients();
}

void Parallel::save(const tg::Checkpoint& ck, const std::string& path) const {
  if (on_) dist::save_checkpoint(ck, path);
  else ck.save(path);
}

tg::Checkpoint Parallel::load(const std::string& path) const {
  return on_ ? dist::load_checkpoint(path) : tg::Checkpoint::load(path);
}

double Parallel::mean(double value) const {
  return on_ ? dist::allreduce(value, dist::ReduceOp::Average) : value;
}

#else  // built without MPI: only the single-process path exists

struct Parallel::Impl {};

bool Parallel::available() { return false; }

Parallel::Parallel(bool on) : on_(on) {
  check_not_launched_in_parallel(on_);
  if (on_)
    throw tg::ValueError("--distributed: this build has no MPI (tapegrad::distributed); install "
                         "libopenmpi-dev openmpi-bin and reconfigure");
}

Parallel::~Parallel() = default;
void Parallel::wrap(const std::shared_ptr<tg::nn::Module>&) {}
void Parallel::sync_gradients() {}
void Parallel::save(const tg::Checkpoint& ck, const std::string& path) const { ck.save(path); }
tg::Checkpoint Parallel::load(const std::string& path) const { return tg::Checkpoint::load(path); }
double Parallel::mean(double value) const { return value; }

#endif

tg::data::DataLoaderOptions Parallel::shard(tg::data::DataLoaderOptions options) const {
  return on_ ? options.shard(rank_, world_) : options;
}

}  // namespace ex
