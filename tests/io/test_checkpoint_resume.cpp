// Bitwise resume: N training steps straight equal k steps, a checkpoint written to disk,
// a fresh model, optimizer, scheduler and RNG restored from it, and N − k more steps —
// bit for bit, for SGD with momentum and for AdamW with warmup-cosine and dropout on.
// Batches are drawn from the global RNG, so a resume that lost the RNG state would differ.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>

#include "tapegrad/optim.h"
#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;

namespace {

std::string tmp_path(const std::string& name) {
  static const test_util::ScratchDir dir("tg_resume");
  return dir.path(name);
}

/// x (B, 4) -> logits (B, 3): Linear, tanh, dropout, Linear.
struct Net : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::Dropout> drop;
  explicit Net(float p) : Module("Net") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 16));
    drop = register_module("drop", std::make_shared<nn::Dropout>(p));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(16, 3));
  }
  Tensor forward(const Tensor& x) { return fc2->forward(drop->forward(tanh(fc1->forward(x)))); }
};

/// A fixed data set (made from its own generator, not the global one): 64 points, 3 classes.
struct Data {
  Tensor x;
  std::vector<int64_t> y;
  Data() {
    Generator g(123);
    std::vector<float> xs(64 * 4);
    for (auto& v : xs) v = g.normal();
    x = tensor(xs, {64, 4});
    for (int i = 0; i < 64; ++i) y.push_back(static_cast<int64_t>(g.below(3)));
  }
};

/// Everything a run needs; `make_sched` may return null (no scheduler).
struct TrainRun {
  std::shared_ptr<Net> net;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<optim::LRScheduler> sched;
};
using MakeRun = std::function<TrainRun()>;

/// `steps` steps; batches of 8 indices drawn from the global RNG. Returns the losses.
std::vector<float> train(Net& net, optim::Optimizer& opt, optim::LRScheduler* sched, const Data& d,
                         int steps) {
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    std::vector<int64_t> idx, tgt;
    for (int b = 0; b < 8; ++b) {
      idx.push_back(static_cast<int64_t>(default_generator().below(64)));
      tgt.push_back(d.y[static_cast<size_t>(idx.back())]);
    }
    const Tensor xb = index_select(d.x, 0, Indices(idx, {8}));
    Tensor loss = cross_entropy(net.forward(xb), Indices(tgt, {8}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (sched) sched->step();
    losses.push_back(loss.item());
  }
  return losses;
}

std::vector<float> train(TrainRun& r, const Data& d, int steps) {
  return train(*r.net, *r.opt, r.sched.get(), d, steps);
}

std::vector<uint32_t> bits(const nn::Module& m) {
  std::vector<uint32_t> out;
  for (auto& [n, t] : m.named_state()) {
    const auto v = t.to_vector();
    const size_t at = out.size();
    out.resize(at + v.size());
    if (!v.empty()) std::memcpy(&out[at], v.data(), v.size() * 4);
  }
  return out;
}

bool same_state(const StateDict& a, const StateDict& b) {
  if (a.numbers != b.numbers || a.strings != b.strings || a.tensors.size() != b.tensors.size())
    return false;
  for (const auto& [k, t] : a.tensors) {
    auto it = b.tensors.find(k);
    if (it == b.tensors.end() || it->second.shape() != t.shape() ||
        it->second.to_vector() != t.to_vector())
      return false;
  }
  return true;
}

void check_bitwise_resume(const MakeRun& make, int n, int k, const std::string& name) {
  const Data data;
  // Straight through.
  manual_seed(7);
  TrainRun straight = make();
  const auto losses = train(straight, data, n);

  // k steps, then a checkpoint on disk.
  manual_seed(7);
  TrainRun first = make();
  train(first, data, k);
  {
    Checkpoint ck;
    ck.set_model(*first.net);
    ck.set("optimizer", first.opt->state_dict());
    if (first.sched) ck.set("scheduler", first.sched->state_dict());
    ck.step = k;
    ck.metadata["test"] = name;
    ck.save(tmp_path(name + ".ckpt"));
  }
  first = TrainRun{};  // gone: nothing of the first run survives but the file

  // A fresh process, in effect: other seed, other weights, fresh optimizer and scheduler.
  manual_seed(999);
  TrainRun resumed = make();
  ASSERT_NE(bits(*resumed.net), bits(*straight.net));
  const Checkpoint ck = Checkpoint::load(tmp_path(name + ".ckpt"));
  EXPECT_EQ(ck.step, k);
  if (resumed.sched)
    ck.restore(*resumed.net, {{"optimizer", *resumed.opt}, {"scheduler", *resumed.sched}});
  else
    ck.restore(*resumed.net, {{"optimizer", *resumed.opt}});
  const auto rest = train(resumed, data, n - k);

  EXPECT_EQ(bits(*resumed.net), bits(*straight.net)) << name << ": weights differ";
  EXPECT_TRUE(same_state(resumed.opt->state_dict(), straight.opt->state_dict())) << name;
  if (resumed.sched) {
    EXPECT_EQ(resumed.sched->last_epoch(), straight.sched->last_epoch());
    EXPECT_EQ(resumed.sched->get_last_lr(), straight.sched->get_last_lr());
  }
  ASSERT_EQ(rest.size(), static_cast<size_t>(n - k));
  for (int s = k; s < n; ++s)
    EXPECT_EQ(rest[static_cast<size_t>(s - k)], losses[static_cast<size_t>(s)]) << name << " step " << s;
  EXPECT_EQ(default_generator().state(), [&] {
    // Both runs drew the same numbers: the straight run's generator ended where this one did.
    manual_seed(7);
    TrainRun again = make();
    train(again, data, n);
    return default_generator().state();
  }());
}

}  // namespace

TEST(CheckpointResume, SgdWithMomentumIsBitwise) {
  check_bitwise_resume(
      [] {
        TrainRun r;
        r.net = std::make_shared<Net>(0.0f);
        r.opt = std::make_unique<optim::SGD>(
            r.net->parameters(), optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(1e-3));
        return r;
      },
      /*n=*/20, /*k=*/7, "sgd");
}

TEST(CheckpointResume, AdamWWithWarmupCosineAndDropoutIsBitwise) {
  check_bitwise_resume(
      [] {
        TrainRun r;
        r.net = std::make_shared<Net>(0.3f);
        auto* adamw = new optim::AdamW(r.net->parameters(), optim::AdamWOptions(3e-3).weight_decay(0.05));
        r.opt.reset(adamw);
        r.sched = std::make_unique<optim::WarmupCosineLR>(*adamw, /*warmup=*/5, /*total=*/25, 0.1);
        return r;
      },
      /*n=*/24, /*k=*/9, "adamw");  // the checkpoint falls inside the warmup → cosine turn
}

TEST(CheckpointResume, FailedRestoreLeavesModelAndOptimizerUntouched) {
  const Data data;
  manual_seed(3);
  Net net(0.0f);
  optim::AdamW opt(net.parameters(), optim::AdamWOptions(1e-2));
  optim::StepLR step_sched(opt, 3);
  train(net, opt, &step_sched, data, 4);
  Checkpoint ck;
  ck.set_model(net);
  ck.set("optimizer", opt.state_dict());
  ck.set("scheduler", step_sched.state_dict());  // a StepLR state

  // The target has a warmup-cosine scheduler: its load fails after the optimizer's succeeded.
  manual_seed(4);
  Net net2(0.0f);
  optim::AdamW opt2(net2.parameters(), optim::AdamWOptions(1e-2));
  optim::WarmupCosineLR sched2(opt2, 2, 10);
  train(net2, opt2, &sched2, data, 2);
  const auto weights_before = bits(net2);
  const StateDict opt_before = opt2.state_dict();
  const auto rng_before = default_generator().state();
  EXPECT_THROW(ck.restore(net2, {{"optimizer", opt2}, {"scheduler", sched2}}), CheckpointError);
  EXPECT_EQ(bits(net2), weights_before);
  EXPECT_TRUE(same_state(opt2.state_dict(), opt_before));
  EXPECT_FALSE(same_state(opt2.state_dict(), ck.get("optimizer")));
  EXPECT_EQ(default_generator().state(), rng_before);
  EXPECT_EQ(sched2.last_epoch(), 2);
}
