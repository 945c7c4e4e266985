// End to end: the optimizers, schedulers, clipping and the DataLoader training real models.
//  - reproducibility: a model with dropout, trained twice from the same seed, gives bitwise
//    identical losses;
//  - two moons: an MLP reaches 100% training accuracy with every optimizer in a fixed budget;
//  - a char-RNN classifier on synthetic sequences: the mean loss of the last 20 of 200 steps
//    is at most a quarter of the first 10 steps'.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "tapegrad/tapegrad.h"

using namespace tg;

namespace {

// ---- a small MLP ------------------------------------------------------------------------------

struct MLP : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, fc3;
  float p_drop;
  MLP(int64_t in, int64_t hidden, int64_t out, float dropout = 0.0f) : Module("MLP"), p_drop(dropout) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(in, hidden));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, hidden));
    fc3 = register_module("fc3", std::make_shared<nn::Linear>(hidden, out));
  }
  /// (B, in) -> (B, out) logits
  Tensor forward(const Tensor& x) {
    Tensor h = tanh(fc1->forward(x));
    h = dropout(h, p_drop, is_training());
    h = tanh(fc2->forward(h));
    return fc3->forward(h);
  }
};

/// Two interleaved half circles, n per class, with Gaussian noise; drawn from the global
/// generator. Returns x (2n, 2) and labels (2n).
std::pair<Tensor, Indices> two_moons(int64_t n, float noise) {
  std::vector<float> x;
  std::vector<int64_t> y;
  auto& gen = default_generator();
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t i = 0; i < n; ++i) {
      const double t = M_PI * static_cast<double>(i) / static_cast<double>(n - 1);
      const double px = c == 0 ? std::cos(t) : 1 - std::cos(t);
      const double py = c == 0 ? std::sin(t) : 0.5 - std::sin(t);
      x.push_back(static_cast<float>(px) + noise * gen.normal());
      x.push_back(static_cast<float>(py) + noise * gen.normal());
      y.push_back(c);
    }
  return {tensor(x, {2 * n, 2}), Indices(y, {2 * n})};
}

double accuracy(MLP& model, const Tensor& x, const Indices& y) {
  NoGradGuard no_grad;
  model.eval();
  const Indices pred(model.forward(x).argmax(1));
  model.train();
  int64_t right = 0;
  for (int64_t i = 0; i < y.numel(); ++i) right += pred.values[i] == y.values[i];
  return static_cast<double>(right) / static_cast<double>(y.numel());
}

}  // namespace

// ---- reproducibility -----------------------------------------------------------------------------

namespace {
/// 100 steps of Adam + dropout + shuffled mini-batches, all randomness from `seed`.
std::vector<float> train_with_dropout(uint64_t seed) {
  manual_seed(seed);
  auto model = std::make_shared<MLP>(4, 16, 3, /*dropout=*/0.3f);
  const Tensor x = randn({40, 4});
  std::vector<int64_t> labels;
  for (int i = 0; i < 40; ++i) labels.push_back((x.data()(i, 0) > 0) + (x.data()(i, 1) > 0.5f));
  data::DataLoader loader(data::TensorDataset({x}, Indices(labels, {40})),
                          data::DataLoaderOptions(8).shuffle(true));
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-2));
  std::vector<float> losses;
  while (losses.size() < 100)
    for (const auto& batch : loader) {
      if (losses.size() == 100) break;
      opt.zero_grad();
      Tensor loss = cross_entropy(model->forward(batch.tensors[0]), batch.targets);
      loss.backward();
      opt.step();
      losses.push_back(loss.item());
    }
  return losses;
}
}  // namespace

TEST(TrainE2E, SameSeedGivesBitwiseIdenticalLosses) {
  const auto a = train_with_dropout(2024), b = train_with_dropout(2024);
  ASSERT_EQ(a.size(), 100u);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), sizeof(float) * a.size()), 0);
  const auto c = train_with_dropout(2025);
  EXPECT_NE(a, c);  // the seed matters (init, dropout and shuffling all draw from it)
}

// ---- two moons, every optimizer ----------------------------------------------------------------

namespace {
using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

/// Trains a 2-16-16-2 MLP for `steps` mini-batch steps (batch 32, shuffled), with a cosine
/// schedule and clipping at norm 1; returns the training accuracy.
double train_moons(const MakeOpt& make, int64_t steps) {
  manual_seed(7);
  const auto [x, y] = two_moons(64, 0.1f);
  auto model = std::make_shared<MLP>(2, 16, 2);
  auto opt = make(model->parameters());
  optim::CosineAnnealingLR sched(*opt, steps, 0.0);
  data::DataLoader loader(data::TensorDataset({x}, y), data::DataLoaderOptions(32).shuffle(true));
  int64_t step = 0;
  while (step < steps)
    for (const auto& batch : loader) {
      if (step++ == steps) break;
      opt->zero_grad();
      Tensor loss = cross_entropy(model->forward(batch.tensors[0]), batch.targets);
      loss.backward();
      nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      opt->step();
      sched.step();
    }
  return accuracy(*model, x, y);
}
}  // namespace

TEST(TrainE2E, TwoMoonsReachFullAccuracyWithEveryOptimizer) {
  constexpr int64_t kSteps = 400;  // the fixed budget, the same for every optimizer (all reach
                                   // 100% by 200-300 steps here; 50 steps give 87-89%)
  const std::vector<std::pair<std::string, MakeOpt>> optimizers = {
      {"SGD+momentum", [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.2).momentum(0.9));
       }},
      {"SGD+nesterov", [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.2).momentum(0.9).nesterov(true));
       }},
      {"Adam", [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adam>(p, optim::AdamOptions(0.03));
       }},
      {"AdamW", [](std::vector<Tensor> p) {
         return std::make_unique<optim::AdamW>(p, optim::AdamWOptions(0.03));
       }},
      {"RMSprop", [](std::vector<Tensor> p) {
         return std::make_unique<optim::RMSprop>(p, optim::RMSpropOptions(0.01));
       }},
  };
  for (const auto& [name, make] : optimizers)
    EXPECT_EQ(train_moons(make, kSteps), 1.0) << name;
}

// ---- char-RNN classifier ------------------------------------------------------------------------

namespace {

/// An Elman RNN classifier: h_t = tanh(i2h(x_t) + h2h(h_{t-1})), logits = h2o(h_T), where x_t
/// is the one-hot of token t and h stops changing after each sequence's end (padding).
struct CharRNN : nn::Module {
  int64_t vocab, hidden;
  std::shared_ptr<nn::Linear> i2h, h2h, h2o;
  CharRNN(int64_t v, int64_t h, int64_t classes) : Module("CharRNN"), vocab(v), hidden(h) {
    i2h = register_module("i2h", std::make_shared<nn::Linear>(v, h));
    h2h = register_module("h2h", std::make_shared<nn::Linear>(h, h));
    h2o = register_module("h2o", std::make_shared<nn::Linear>(h, classes));
  }
  /// ids (B, T) padded, lengths (B) -> log-probabilities (B, classes)
  Tensor forward(const Indices& ids, const std::vector<int64_t>& lengths) {
    const int64_t B = ids.shape[0], T = ids.shape[1];
    Tensor h = zeros({B, hidden});
    for (int64_t t = 0; t < T; ++t) {
      Tensor x = zeros({B, vocab}), live = zeros({B, 1});
      for (int64_t b = 0; b < B; ++b) {
        x.data()(b, ids.values[b * T + t]) = 1.0f;
        live.data()(b, 0) = t < lengths[b] ? 1.0f : 0.0f;
      }
      Tensor next = tanh(i2h->forward(x) + h2h->forward(h));
      h = tg::where(live, next, h);
    }
    return log_softmax(h2o->forward(h), -1);
  }
};

/// Three classes of sequences over 8 symbols, lengths 3..8: class c draws symbols 2c and
/// 2c + 1 with probability 0.6 and any symbol otherwise.
data::SequenceDataset synthetic_sequences(int64_t n) {
  auto& gen = default_generator();
  std::vector<std::vector<int64_t>> seqs;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = static_cast<int64_t>(gen.below(3));
    const int64_t len = 3 + static_cast<int64_t>(gen.below(6));
    std::vector<int64_t> s;
    for (int64_t t = 0; t < len; ++t)
      s.push_back(gen.uniform() < 0.6f ? 2 * c + static_cast<int64_t>(gen.below(2))
                                       : static_cast<int64_t>(gen.below(8)));
    seqs.push_back(s);
    labels.push_back(c);
  }
  return data::SequenceDataset(seqs, labels, /*pad_id=*/0);
}

}  // namespace

TEST(TrainE2E, CharRnnLossFallsToAQuarterIn200Steps) {
  manual_seed(11);
  data::DataLoader loader(synthetic_sequences(300), data::DataLoaderOptions(16).shuffle(true));
  auto model = std::make_shared<CharRNN>(8, 24, 3);
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-2));
  optim::WarmupCosineLR sched(opt, 10, 200, 0.1);
  std::vector<float> losses;
  while (losses.size() < 200)
    for (const auto& batch : loader) {
      if (losses.size() == 200) break;
      opt.zero_grad();
      Tensor loss = nll_loss(model->forward(batch.ids, batch.lengths), batch.labels);
      loss.backward();
      nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      opt.step();
      sched.step();
      losses.push_back(loss.item());
    }
  auto mean = [&](size_t from, size_t to) {
    double s = 0;
    for (size_t i = from; i < to; ++i) s += losses[i];
    return s / static_cast<double>(to - from);
  };
  const double first = mean(0, 10), last = mean(180, 200);
  // The stated margin: the mean loss of the last 20 steps is at most a quarter of that of the
  // first 10 (which starts near ln 3 = 1.10 for three balanced classes). Measured here:
  // 1.04 -> 0.086.
  EXPECT_GT(first, 0.9);
  EXPECT_LT(last, 0.25 * first) << "first 10 steps: " << first << ", last 20: " << last;
  std::cout << "char-RNN loss: first 10 steps " << first << ", last 20 steps " << last << "\n";
}
