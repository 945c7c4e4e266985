#include "common/parallel.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tapegrad/error.h"
#include "tapegrad/random.h"
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

/// Each rank's 4 state words in 16-bit pieces (exact in a float), summed into slots of zeros.
static std::vector<tg::Generator::State> gather_generators(bool on, int rank, int world) {
  const tg::Generator::State mine = tg::default_generator().state();
  std::vector<float> slots(static_cast<size_t>(world) * 16, 0.0f);
  for (int k = 0; k < 4; ++k)
    for (int c = 0; c < 4; ++c)
      slots[static_cast<size_t>(rank) * 16 + k * 4 + c] = static_cast<float>((mine[k] >> (16 * c)) & 0xffff);
  if (on) dist::allreduce(slots.data(), static_cast<int64_t>(slots.size()));
  std::vector<tg::Generator::State> all(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r)
    for (int k = 0; k < 4; ++k)
      for (int c = 0; c < 4; ++c)
        all[r][k] |= static_cast<uint64_t>(slots[static_cast<size_t>(r) * 16 + k * 4 + c]) << (16 * c);
  return all;
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

namespace {
std::string rng_key(int rank, int k, const char* half) {
  return "rank." + std::to_string(rank) + ".s" + std::to_string(k) + "." + half;
}
}  // namespace

tg::StateDict Parallel::rng_state_dict() const {
#ifdef TAPEGRAD_HAS_DISTRIBUTED
  const auto all = gather_generators(on_, rank_, world_);
#else
  const std::vector<tg::Generator::State> all{tg::default_generator().state()};
#endif
  tg::StateDict d;
  d.strings["type"] = "RankGenerators";
  d.numbers["world_size"] = world_;
  for (int r = 0; r < world_; ++r)
    for (int k = 0; k < 4; ++k) {
      d.numbers[rng_key(r, k, "hi")] = static_cast<double>(all[r][k] >> 32);
      d.numbers[rng_key(r, k, "lo")] = static_cast<double>(all[r][k] & 0xffffffffu);
    }
  return d;
}

void Parallel::load_rng_state_dict(const tg::StateDict& d) const {
  const std::string owner = "RankGenerators";
  if (d.string_at("type", owner) != owner)
    throw tg::CheckpointError(owner + ": the state is a " + d.string_at("type", owner));
  const double world = d.number_at("world_size", owner);
  if (world != world_)
    throw tg::CheckpointError("the checkpoint was written by " + std::to_string(static_cast<int64_t>(world)) +
                              " ranks, this run has " + std::to_string(world_) + "; resume with as many");
  tg::Generator::State st{};
  for (int k = 0; k < 4; ++k)
    st[k] = static_cast<uint64_t>(d.number_at(rng_key(rank_, k, "hi"), owner)) << 32 |
            static_cast<uint64_t>(d.number_at(rng_key(rank_, k, "lo"), owner));
  tg::default_generator().set_state(st);
}

}  // namespace ex
