// tg::distributed under mpirun (ctest runs it with -np 2 and -np 3; it also passes as one
// process). Every test runs on every rank and calls the collectives in the same order; checks
// are EXPECTs made after the collectives, so a failure on one rank never strands the others.
//  - primitives: allreduce (sum, average, long buffers), broadcast, barrier;
//  - broadcast_state / verify_state, and the errors when models or parameters differ;
//  - buckets: the plan, and sync_gradients over many buckets, with unused and frozen parameters;
//  - equivalence: W ranks at batch b equal one process at batch W*b after 20 steps (SGD with
//    momentum, AdamW), the reference computed in the same program on every rank;
//  - checkpoints: rank 0 writes, every rank resumes (from the file, or broadcast) and the run
//    continues exactly as the uninterrupted one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tapegrad/distributed.h"
#include "tapegrad/tapegrad.h"

using namespace tg;
namespace dist = tg::distributed;

namespace {

// The one-rank run (ctest distributed.mpi_np1) skips the tests that compare ranks; they run
// in distributed.mpi_np2, mpi_np3 and mpi_np2_tcp_loopback.
constexpr const char* kNeedsTwoRanks = "needs 2 ranks (runs under distributed.mpi_np2 and mpi_np3)";

struct MLP : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, fc3;
  MLP(int64_t in, int64_t hidden, int64_t out) : Module("MLP") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(in, hidden));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, hidden));
    fc3 = register_module("fc3", std::make_shared<nn::Linear>(hidden, out));
  }
  /// (B, in) -> (B, out)
  Tensor forward(const Tensor& x) { return fc3->forward(tanh(fc2->forward(tanh(fc1->forward(x))))); }
};

std::shared_ptr<MLP> make_mlp(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<MLP>(6, 16, 3);
}

/// 64 samples of 6 features with 3 classes, identical on every rank.
data::TensorDataset make_data() {
  Generator gen(77);
  const int64_t n = 64;
  std::vector<float> x(n * 6);
  std::vector<int64_t> y(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < 6; ++j) x[i * 6 + j] = gen.normal();
    y[i] = (x[i * 6] > 0) + (x[i * 6 + 1] > 0.5f);
  }
  return data::TensorDataset({tensor(x, {n, 6})}, Indices(y, {n}));
}

std::vector<float> flat_state(const nn::Module& m) {
  std::vector<float> out;
  for (const auto& [name, t] : m.named_state()) {
    const auto v = t.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

/// Takes `steps` batches from the loader (crossing epochs; a loop that breaks off resumes
/// where it stopped), each: zero_grad, forward, backward, [sync], step.
void train(MLP& model, optim::Optimizer& opt, data::DataLoader<data::TensorDataset>& loader,
           dist::DistributedDataParallel* ddp, int steps) {
  int done = 0;
  while (done < steps) {
    for (const auto& batch : loader) {
      opt.zero_grad();
      cross_entropy(model.forward(batch.tensors[0]), batch.targets).backward();
      if (ddp) ddp->sync_gradients();
      opt.step();
      if (++done == steps) break;
    }
  }
}

enum class Opt { SGD, AdamW };
std::unique_ptr<optim::Optimizer> make_opt(Opt which, MLP& m) {
  if (which == Opt::SGD)
    return std::make_unique<optim::SGD>(m.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  return std::make_unique<optim::AdamW>(m.parameters(), optim::AdamWOptions(1e-2));
}

/// A directory every rank can reach (they share this machine): rank 0 names it.
std::string shared_dir() {
  std::string dir;
  if (dist::rank() == 0) {
    dir = (std::filesystem::temp_directory_path() / ("tapegrad_ddp_" + std::to_string(getpid()))).string();
    std::filesystem::create_directories(dir);
  }
  dist::broadcast(dir, 0);
  return dir;
}

}  // namespace

// ---- primitives ------------------------------------------------------------------------------

TEST(Distributed, RankAndWorld) {
  const int r = dist::rank(), w = dist::world_size();
  EXPECT_GE(w, 1);
  EXPECT_GE(r, 0);
  EXPECT_LT(r, w);
  EXPECT_EQ(dist::is_main(), r == 0);
  EXPECT_FALSE(dist::processor_name().empty());
  // Each rank contributes its rank: the ranks are 0 .. W-1, each once.
  EXPECT_EQ(dist::allreduce(static_cast<double>(r)), w * (w - 1) / 2.0);
  EXPECT_EQ(dist::allreduce(1.0, dist::ReduceOp::Average), 1.0);
  dist::barrier();
}

TEST(Distributed, AllreduceSumAndAverage) {
  const int r = dist::rank(), w = dist::world_size();
  // 3M floats: longer than any single bucket used below.
  std::vector<float> v(3 << 20);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i % 97) * (r + 1));
  std::vector<float> avg = v;
  dist::allreduce(v.data(), static_cast<int64_t>(v.size()));
  dist::allreduce(avg.data(), static_cast<int64_t>(avg.size()), dist::ReduceOp::Average);
  const float ranks_sum = w * (w + 1) / 2.0f;  // Σ (r + 1)
  int64_t bad_sum = 0, bad_avg = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    bad_sum += v[i] != static_cast<float>(i % 97) * ranks_sum;
    bad_avg += std::fabs(avg[i] - static_cast<float>(i % 97) * ranks_sum / w) > 1e-4f * (i % 97);
  }
  EXPECT_EQ(bad_sum, 0);
  EXPECT_EQ(bad_avg, 0);

  Tensor t = full({2, 3}, static_cast<float>(r));
  dist::allreduce(t);
  for (float x : t.to_vector()) EXPECT_EQ(x, w * (w - 1) / 2.0f);
  dist::allreduce(v.data(), 0);  // an empty buffer is fine
}

TEST(Distributed, Broadcast) {
  const int r = dist::rank(), w = dist::world_size();
  const int root = w - 1;
  std::vector<float> v(1000, static_cast<float>(r));
  dist::broadcast(v.data(), static_cast<int64_t>(v.size()), root);
  for (float x : v) ASSERT_EQ(x, static_cast<float>(root));
  Tensor t = full({4}, static_cast<float>(r) + 0.5f);
  dist::broadcast(t);
  EXPECT_EQ(t.to_vector(), std::vector<float>(4, 0.5f));
  std::string s = r == 0 ? std::string("from rank 0\0with a zero byte", 27) : "x";
  dist::broadcast(s);
  EXPECT_EQ(s, std::string("from rank 0\0with a zero byte", 27));
  EXPECT_THROW(dist::broadcast(v.data(), 1, w), ValueError);  // not a rank (local check)
}

// ---- state broadcast and verification ------------------------------------------------------------

TEST(Distributed, DDPStartsFromRankZerosWeights) {
  const int r = dist::rank();
  auto model = make_mlp(100 + r);  // a different init on every rank
  const std::vector<float> rank0 = flat_state(*make_mlp(100));
  if (dist::world_size() > 1) {
    EXPECT_THROW(dist::verify_state(*model), DistributedError);
  }
  dist::DistributedDataParallel ddp(model, dist::DDPOptions().bucket_bytes(256));
  EXPECT_EQ(flat_state(*model), rank0);
  EXPECT_NO_THROW(ddp.verify_state());
}

TEST(Distributed, DifferentModelsAreRejectedOnEveryRank) {
  manual_seed(1);
  // Rank 1 builds a wider hidden layer than the others.
  auto model = std::make_shared<MLP>(6, dist::rank() == 1 ? 17 : 16, 3);
  if (dist::world_size() == 1) GTEST_SKIP() << kNeedsTwoRanks;
  try {
    dist::DistributedDataParallel ddp(model);
    ADD_FAILURE() << "expected tg::DistributedError";
  } catch (const DistributedError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank(s) 1"), std::string::npos) << msg;
    if (dist::rank() == 1) EXPECT_NE(msg.find("fc1.weight"), std::string::npos) << msg;
  }
  EXPECT_THROW(dist::verify_state(*model), DistributedError);
}

TEST(Distributed, DifferentTrainableParametersAreRejected) {
  auto model = make_mlp(0);
  if (dist::rank() == 1) model->fc2->bias.requires_grad_(false);  // frozen on rank 1 only
  if (dist::world_size() == 1) GTEST_SKIP() << kNeedsTwoRanks;
  try {
    dist::DistributedDataParallel ddp(model);
    ADD_FAILURE() << "expected tg::DistributedError";
  } catch (const DistributedError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("require grad differ from rank 0's on rank(s) 1"), std::string::npos) << msg;
  }
}

TEST(Distributed, TiedWeightsAreSyncedOnce) {
  struct Tied : nn::Module {
    Tensor w;
    Tied() : Module("Tied") {
      w = register_parameter("w", ones({3}));
      register_parameter("w_again", w);  // the same tensor under a second name
    }
  };
  auto model = std::make_shared<Tied>();
  dist::DistributedDataParallel ddp(model);
  ASSERT_EQ(ddp.parameters().size(), 1u);
  model->w.set_grad(full({3}, static_cast<float>(dist::rank())));
  ddp.sync_gradients();
  const float mean = (dist::world_size() - 1) / 2.0f;
  EXPECT_EQ(model->w.grad().to_vector(), std::vector<float>(3, mean));
}

TEST(Distributed, VerifyStateNamesTheDivergedParameter) {
  auto model = make_mlp(3);
  dist::DistributedDataParallel ddp(model);
  EXPECT_NO_THROW(ddp.verify_state());
  if (dist::world_size() == 1) GTEST_SKIP() << kNeedsTwoRanks;
  if (dist::rank() == 1) model->fc2->bias.data()[5] += 1e-6f;  // one float, one ulp or so
  try {
    ddp.verify_state();
    ADD_FAILURE() << "expected tg::DistributedError";
  } catch (const DistributedError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("fc2.bias"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank(s) 1 "), std::string::npos) << msg;
  }
  // verify_every: the 2nd sync checks, and throws on every rank.
  dist::DistributedDataParallel checked(model, dist::DDPOptions().broadcast_on_init(false).verify_every(2));
  EXPECT_NO_THROW(checked.sync_gradients());
  EXPECT_THROW(checked.sync_gradients(), DistributedError);
}

// ---- buckets ---------------------------------------------------------------------------------------

TEST(Distributed, BucketPlan) {
  using V = std::vector<int64_t>;
  auto plan = [](const V& sizes, int64_t bytes) {
    std::vector<V> out;
    for (const auto& b : dist::plan_buckets(sizes, bytes)) {
      int64_t numel = 0;
      for (int64_t i : b.params) numel += sizes[i];
      EXPECT_EQ(numel, b.numel);
      out.push_back(b.params);
    }
    return out;
  };
  // 40 bytes = 10 floats per bucket.
  EXPECT_EQ(plan({4, 4, 4, 4}, 40), (std::vector<V>{{0, 1}, {2, 3}}));
  EXPECT_EQ(plan({10, 1, 9, 1}, 40), (std::vector<V>{{0}, {1, 2}, {3}}));
  EXPECT_EQ(plan({3, 25, 3}, 40), (std::vector<V>{{0}, {1}, {2}}));  // too big: alone
  EXPECT_EQ(plan({1, 2, 3}, 25 << 20), (std::vector<V>{{0, 1, 2}}));
  EXPECT_EQ(plan({1, 2, 3}, 1), (std::vector<V>{{0}, {1}, {2}}));
  EXPECT_TRUE(plan({}, 40).empty());
  EXPECT_THROW(dist::plan_buckets({1}, 0), ValueError);

  // An MLP 6-16-16-3 has tensors of 96, 16, 256, 16, 48, 3 floats: 1 KiB buckets (256 floats).
  auto model = make_mlp(0);
  dist::DistributedDataParallel ddp(model, dist::DDPOptions().bucket_bytes(1024));
  ASSERT_EQ(ddp.buckets().size(), 3u);
  EXPECT_EQ(ddp.buckets()[0].params, (V{0, 1}));
  EXPECT_EQ(ddp.buckets()[1].params, (V{2}));
  EXPECT_EQ(ddp.buckets()[2].params, (V{3, 4, 5}));
  dist::DistributedDataParallel one(model);  // the default, 25 MiB: everything in one message
  EXPECT_EQ(one.buckets().size(), 1u);
}

TEST(Distributed, SyncAveragesEveryBucketAndHandlesMissingGrads) {
  const int r = dist::rank(), w = dist::world_size();
  auto model = make_mlp(0);
  model->fc3->bias.requires_grad_(false);  // frozen: not synced, not touched
  // 112 floats a bucket: {fc1.weight 96, fc1.bias 16}, {fc2.weight 256}, {fc2.bias 16, fc3.weight 48}.
  dist::DistributedDataParallel ddp(model, dist::DDPOptions().bucket_bytes(112 * 4));
  EXPECT_EQ(ddp.parameters().size(), 5u);
  EXPECT_EQ(ddp.buckets().size(), 3u);
  for (const auto& [name, p] : ddp.parameters()) {
    std::vector<float> g(p.numel());
    for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i) + 1000.0f * r;
    p.set_grad(tensor(g, p.shape()));
  }
  model->fc2->bias.set_grad(Tensor());           // used by no rank
  if (r == 0) model->fc1->bias.set_grad(Tensor());  // unused on rank 0 only
  model->fc3->bias.set_grad(full({3}, 7.0f));
  ddp.sync_gradients();

  const float rank_mean = 1000.0f * (w - 1) / 2.0f;  // mean of 1000 r over the ranks
  for (const auto& [name, p] : ddp.parameters()) {
    SCOPED_TRACE(name);
    const Tensor g = p.grad();
    if (name == "fc2.bias" || (name == "fc1.bias" && w == 1)) {  // no rank has one
      EXPECT_FALSE(g.defined());
      continue;
    }
    ASSERT_TRUE(g.defined());
    const auto v = g.to_vector();
    for (size_t i = 0; i < v.size(); ++i) {
      // fc1.bias: rank 0 counts as zero, so the mean is (Σ_{r>0} (i + 1000 r)) / W.
      const float expect = name == "fc1.bias"
                               ? (static_cast<float>(i) * (w - 1) + 1000.0f * w * (w - 1) / 2) / w
                               : static_cast<float>(i) + rank_mean;
      ASSERT_NEAR(v[i], expect, 1e-3f) << i;
    }
  }
  EXPECT_EQ(model->fc3->bias.grad().to_vector(), std::vector<float>(3, 7.0f));
}

// ---- W ranks at batch b == one process at batch W*b -------------------------------------------

namespace {
void expect_equivalent(Opt which, float tol) {
  const int r = dist::rank(), w = dist::world_size();
  const int64_t b = 4;
  const auto ds = make_data();
  // The reference: one process, batch W*b, same seed and data order. drop_last keeps the
  // epochs identical when W does not divide 64.
  auto ref = make_mlp(42);
  auto ref_opt = make_opt(which, *ref);
  data::DataLoader ref_loader(ds, data::DataLoaderOptions(w * b).shuffle(true).seed(3).drop_last(true));
  train(*ref, *ref_opt, ref_loader, nullptr, 20);

  auto model = make_mlp(1000 + r);  // replaced by rank 0's weights (make_mlp(42) there)
  if (r == 0) model = make_mlp(42);
  dist::DistributedDataParallel ddp(model, dist::DDPOptions().bucket_bytes(512).verify_every(5));
  auto opt = make_opt(which, *model);
  data::DataLoader loader(ds, data::DataLoaderOptions(b).shuffle(true).seed(3).drop_last(true).shard(r, w));
  train(*model, *opt, loader, &ddp, 20);

  const auto got = flat_state(*model), want = flat_state(*ref);
  const auto init = flat_state(*make_mlp(42));
  EXPECT_GT(max_abs_diff(want, init), 50 * tol) << "the reference run did not move the weights";
  EXPECT_LE(max_abs_diff(got, want), tol) << "rank " << r;
  EXPECT_NO_THROW(ddp.verify_state());  // replicas bitwise identical
}
}  // namespace

TEST(Distributed, EquivalentToOneProcessWithSGD) { expect_equivalent(Opt::SGD, 2e-5f); }
TEST(Distributed, EquivalentToOneProcessWithAdamW) { expect_equivalent(Opt::AdamW, 2e-5f); }

// ---- checkpoints ---------------------------------------------------------------------------------

TEST(Distributed, RankZeroSavesEveryRankResumes) {
  const int r = dist::rank(), w = dist::world_size();
  const auto ds = make_data();
  const std::string dir = shared_dir(), path = dir + "/run.ckpt";
  auto loader_opts = data::DataLoaderOptions(4).shuffle(true).seed(8).shard(r, w);

  // Uninterrupted: 10 steps, checkpoint, 10 more.
  auto model = make_mlp(5);
  dist::DistributedDataParallel ddp(model);
  auto opt = make_opt(Opt::AdamW, *model);
  data::DataLoader loader(ds, loader_opts);
  train(*model, *opt, loader, &ddp, 10);
  Checkpoint ck;
  ck.set_model(*model);
  ck.set("optimizer", opt->state_dict());
  ck.set("data", loader.state_dict());  // rank 0's position; every rank's is the same
  ck.step = 10;
  dist::save_checkpoint(ck, path);
  EXPECT_TRUE(std::filesystem::exists(path));  // complete on return, on every rank
  train(*model, *opt, loader, &ddp, 10);
  const auto uninterrupted = flat_state(*model);

  // Resumed, twice: from the broadcast file, and from each rank reading the file itself.
  for (bool broadcast : {true, false}) {
    SCOPED_TRACE(broadcast ? "load_checkpoint" : "Checkpoint::load on every rank");
    auto m2 = make_mlp(99 + r);
    dist::DistributedDataParallel ddp2(m2, dist::DDPOptions().broadcast_on_init(false));
    auto opt2 = make_opt(Opt::AdamW, *m2);
    data::DataLoader loader2(ds, loader_opts);
    const Checkpoint back = broadcast ? dist::load_checkpoint(path) : Checkpoint::load(path);
    back.restore(*m2, {{"optimizer", *opt2}, {"data", loader2}});
    EXPECT_EQ(back.step, 10);
    EXPECT_NO_THROW(ddp2.verify_state());
    train(*m2, *opt2, loader2, &ddp2, 10);
    EXPECT_EQ(flat_state(*m2), uninterrupted);  // bitwise
  }

  // Failures reach every rank: an unwritable path, a missing file.
  EXPECT_THROW(dist::save_checkpoint(ck, dir + "/no/such/dir/x.ckpt"), IOError);
  EXPECT_THROW(dist::load_checkpoint(dir + "/missing.ckpt"), IOError);
  dist::barrier();
  if (r == 0) std::filesystem::remove_all(dir);
}

// ---- main: MPI around the tests; only rank 0 prints ---------------------------------------------

namespace {
/// On ranks other than 0: only failed checks, one line each, tagged with the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestStart(const ::testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::printf("[rank %d] %s: %s:%d: %s\n", rank_, test_.c_str(),
                result.file_name() ? result.file_name() : "?", result.line_number(), result.message());
    std::fflush(stdout);
  }

 private:
  int rank_;
  std::string test_;
};
}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dist::Guard mpi(argc, argv);
  if (dist::rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(dist::rank()));
  }
  const int failed = RUN_ALL_TESTS();
  // Any rank's failure fails the run on every rank (mpirun reports the first nonzero exit).
  const double failures = dist::allreduce(static_cast<double>(failed != 0));
  if (dist::rank() == 0 && failures > 0)
    std::printf("[distributed] %g rank(s) failed (their messages are tagged [rank r])\n", failures);
  return failures > 0 ? 1 : 0;
}
