// The passes around the products on tapegrad's own threads (backend/parallel.h): for_range's
// parts, and every op whose passes split across threads (the vector kernels, linear's bias
// copy and db, linear_act, layer_norm, add_layer_norm, softmax, log_softmax, cross_entropy,
// the reference attention kernel, the engine's gradient accumulation, Adam) giving the same
// bits at 1 and 2 threads, forward and backward, at sizes above the grain; the pool must have
// run jobs at 2 threads (pool_jobs), so a test cannot pass by never splitting. Last, one
// training step of a transformer block with AdamW, bit for bit at 1 and 2 threads.
//
// The suite is named Threads: the ThreadSanitizer preset runs it (CMakePresets.json), with
// OPENBLAS_NUM_THREADS=1: OpenBLAS is not instrumented, so TSan cannot see its own threads
// synchronise (its load-time check runs on them) and reports races inside it.
#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend/parallel.h"
#include "backend/thread_pool.h"
#include "backend/vec.h"
#include "ops/linear_act.h"
#include "test_util.h"

using namespace tg;
using test_util::same_bits;
using Tensors = std::vector<Tensor>;

namespace {

/// Leaves for one run: inputs drawn from a fixed seed, so both runs see the same values.
using Make = std::function<Tensors()>;
/// The graph: outputs from the leaves (backward runs on Σ output·r, r random per output).
using Graph = std::function<Tensors(const Tensors&)>;

/// Runs the graph at `threads` threads on fresh leaves; returns the outputs, then every
/// leaf's gradient. jobs: how many pool jobs ran meanwhile.
Tensors run_at(int threads, const Make& make, const Graph& graph, uint64_t& jobs) {
  tg::set_num_threads(threads);
  manual_seed(11);
  const Tensors leaves = make();
  const uint64_t before = detail::pool_jobs();
  const Tensors outs = graph(leaves);
  Tensor loss;
  for (const Tensor& y : outs) {
    const Tensor term = (y * randn(y.shape())).sum();
    loss = loss.defined() ? loss + term : term;
  }
  loss.backward();
  jobs = detail::pool_jobs() - before;
  Tensors result;
  for (const Tensor& y : outs) result.push_back(y.detach());
  for (const Tensor& x : leaves)
    if (x.requires_grad()) result.push_back(x.grad());
  return result;
}

/// The graph's outputs and gradients are the same bits at 1 and 2 threads, and at 2 threads
/// the pool ran at least `min_jobs` jobs.
void expect_same_at_1_and_2(const Make& make, const Graph& graph, uint64_t min_jobs = 1) {
  uint64_t jobs1 = 0, jobs2 = 0;
  const Tensors one = run_at(1, make, graph, jobs1);
  const Tensors two = run_at(2, make, graph, jobs2);
  EXPECT_EQ(jobs1, 0u);
  EXPECT_GE(jobs2, min_jobs) << "the passes did not split at 2 threads";
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(same_bits(two[i], one[i])) << "result " << i;
}

Tensor leaf(const Shape& s) { return randn(s, true); }

class Threads : public ::testing::Test {
 protected:
  void TearDown() override { tg::set_num_threads(1); }
};

}  // namespace

// ---- for_range itself -----------------------------------------------------------------------

TEST_F(Threads, ForRangeCutsIntoAlignedPartsThatCoverTheRange) {
  tg::set_num_threads(2);
  const int64_t n = 3 * detail::kGrain + 5;
  std::vector<int> hits(static_cast<size_t>(n), 0);
  std::vector<std::pair<int64_t, int64_t>> parts(2, {-1, -1});
  detail::for_range(n, detail::kGrain, [&](int64_t b, int64_t e) {
    parts[b == 0 ? 0 : 1] = {b, e};
    for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
  });
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "index " << i;
  EXPECT_EQ(parts[0].first, 0);
  EXPECT_EQ(parts[0].second, parts[1].first);
  EXPECT_EQ(parts[1].second, n);
  EXPECT_EQ(parts[0].second % 16, 0);
}

TEST_F(Threads, ForRangeRunsSmallRangesNestedCallsAndOneThreadAtOnce) {
  auto calls = [](int threads, int64_t n, bool nested) {
    tg::set_num_threads(threads);
    std::atomic<int> count{0};  // parts may run on two threads
    auto body = [&](int64_t, int64_t) { ++count; };
    if (nested)
      detail::parallel_for(2, [&](int p) {
        if (p == 0) detail::for_range(n, 1, body);  // inside a part: never split again
      });
    else
      detail::for_range(n, detail::kGrain, body);
    return count.load();
  };
  EXPECT_EQ(calls(2, detail::kGrain, false), 1);  // one grain: one part
  EXPECT_EQ(calls(2, 2 * detail::kGrain, false), 2);
  EXPECT_EQ(calls(1, 8 * detail::kGrain, false), 1);
  EXPECT_EQ(calls(2, 8 * detail::kGrain, true), 1);
  EXPECT_EQ(calls(2, 0, false), 0);  // nothing to do: no call
}

TEST_F(Threads, ForRowsKeepsRowsWhole) {
  tg::set_num_threads(2);
  const int64_t rows = 1001, cols = 97;  // edges on rows, not on 16
  std::vector<int> hits(static_cast<size_t>(rows), 0);
  std::atomic<int> parts{0};  // the parts run on two threads
  detail::for_rows(rows, cols, detail::kGrain, [&](int64_t r0, int64_t r1) {
    ++parts;
    for (int64_t r = r0; r < r1; ++r) ++hits[static_cast<size_t>(r)];
  });
  EXPECT_EQ(parts.load(), 2);
  for (int h : hits) ASSERT_EQ(h, 1);
}

// ---- the vector kernels -----------------------------------------------------------------------

TEST_F(Threads, KernelsSplitBiasRowsOnWholeRepeats) {
  // y = a + b with b (C) repeating in a (R, C): each part must start b at its first element.
  tg::set_num_threads(2);
  const size_t R = 700, C = 97, n = R * C;
  std::vector<float> a(n), b(C), y(n, -1.0f);
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<float>(i % 1013);
  for (size_t j = 0; j < C; ++j) b[j] = static_cast<float>(j) * 1e4f;
  const uint64_t before = detail::pool_jobs();
  for (bool row_first : {false, true}) {
    if (row_first)
      vec::kernels().binary(vec::Binary::Sub, b.data(), C, a.data(), n, y.data(), n);
    else
      vec::kernels().binary(vec::Binary::Add, a.data(), n, b.data(), C, y.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const float want = row_first ? b[i % C] - a[i] : a[i] + b[i % C];
      ASSERT_EQ(y[i], want) << "element " << i << (row_first ? " (b - a)" : " (a + b)");
    }
  }
  EXPECT_GE(detail::pool_jobs() - before, 2u);
}

TEST_F(Threads, ElementwiseOpsAndTheirBackward) {
  const Shape big{263, 509};  // 133,867 elements: several grains, a ragged end
  using Op = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<std::string, Op>> unary = {
      {"exp", [](const Tensor& x) { return exp(x * 0.1f); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"relu", [](const Tensor& x) { return relu(x); }},
  };
  for (const auto& [name, op] : unary) {
    SCOPED_TRACE(name);
    expect_same_at_1_and_2([&] { return Tensors{leaf(big)}; },
                           [&](const Tensors& v) { return Tensors{op(v[0])}; });
  }
  // Binary ops: same shapes, a bias row, a scalar, a column (xtensor's broadcast).
  expect_same_at_1_and_2([&] { return Tensors{leaf(big), leaf(big), leaf({509}), leaf({263, 1})}; },
                         [](const Tensors& v) {
                           return Tensors{v[0] + v[1], v[0] * v[2], v[1] - v[2], v[0] / 3.0f,
                                          v[1] * v[3], (v[0] + 2.0f) / (v[1] * v[1] + 1.0f)};
                         });
  // A position table added to every sequence: its gradient sums few long rows (sum_to).
  expect_same_at_1_and_2([] { return Tensors{leaf({16, 64, 128}), leaf({64, 128})}; },
                         [](const Tensors& v) { return Tensors{v[0] + v[1]}; });
}

TEST_F(Threads, GradientAccumulation) {
  // x feeds four ops: the engine adds their gradients (add_into), a bias-shaped one included;
  // a second backward adds into the leaf's .grad().
  const Shape big{300, 512};
  auto make = [&] { return Tensors{leaf(big), leaf({512})}; };
  auto graph = [](const Tensors& v) {
    const Tensor h = v[0] * 2.0f + v[0] * v[0];
    const Tensor b = v[1] * 3.0f;
    return Tensors{h + tanh(v[0]) + b, sigmoid(h) + b};
  };
  expect_same_at_1_and_2(make, graph);
  Tensors grads;  // x's .grad() after two backward passes, at 1 then 2 threads
  for (int threads : {1, 2}) {
    tg::set_num_threads(threads);
    manual_seed(3);
    const Tensors v = make();
    for (int i = 0; i < 2; ++i) graph(v)[0].sum().backward();
    grads.push_back(v[0].grad().detach().clone());
  }
  EXPECT_TRUE(same_bits(grads[1], grads[0]));
}

// ---- products and the passes around them ----------------------------------------------------

TEST_F(Threads, LinearBiasCopyAndBiasGradient) {
  expect_same_at_1_and_2([] { return Tensors{leaf({3, 200, 96}), leaf({256, 96}), leaf({256})}; },
                         [](const Tensors& v) { return Tensors{linear(v[0], v[1], v[2])}; });
}

TEST_F(Threads, LinearActReluAndGelu) {
  for (auto act : {detail::Activation::Relu, detail::Activation::Gelu}) {
    SCOPED_TRACE(act == detail::Activation::Relu ? "relu" : "gelu");
    expect_same_at_1_and_2([] { return Tensors{leaf({600, 96}), leaf({512, 96}), leaf({512})}; },
                           [act](const Tensors& v) {
                             return Tensors{detail::linear_act(v[0], v[1], v[2], act)};
                           });
  }
}

// ---- row-wise ops ---------------------------------------------------------------------------

TEST_F(Threads, LayerNormAndAddLayerNorm) {
  const Shape xs{9, 130, 96};
  expect_same_at_1_and_2([&] { return Tensors{leaf(xs), leaf({96}), leaf({96})}; },
                         [](const Tensors& v) { return Tensors{layer_norm(v[0], {96}, v[1], v[2])}; });
  expect_same_at_1_and_2([&] { return Tensors{leaf(xs)}; },  // no weight, no bias
                         [](const Tensors& v) { return Tensors{layer_norm(v[0], {130, 96})}; });
  expect_same_at_1_and_2(
      [&] { return Tensors{leaf(xs), leaf(xs), leaf({96}), leaf({96})}; },
      [](const Tensors& v) {
        const auto [s, n] = add_layer_norm(v[0], v[1], {96}, v[2], v[3]);
        return Tensors{s, n};  // both outputs get a gradient: ds is added to dx
      });
  expect_same_at_1_and_2([&] { return Tensors{leaf(xs), leaf(xs), leaf({96}), leaf({96})}; },
                         [](const Tensors& v) {  // only the norm gets one
                           return Tensors{add_layer_norm(v[0], v[1], {96}, v[2], v[3]).norm};
                         });
}

TEST_F(Threads, SoftmaxAndLogSoftmax) {
  for (int64_t axis : {-1, 1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    expect_same_at_1_and_2([] { return Tensors{leaf({40, 70, 50})}; },
                           [axis](const Tensors& v) {
                             return Tensors{softmax(v[0], axis), log_softmax(v[0], axis)};
                           });
  }
}

TEST_F(Threads, CrossEntropy) {
  const int64_t N = 3000, K = 65;
  std::vector<int64_t> t(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) t[static_cast<size_t>(i)] = (i * 7) % K;
  t[5] = -100;  // ignored
  const Indices targets(t, {N});
  std::vector<float> w(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) w[static_cast<size_t>(k)] = 0.5f + static_cast<float>(k % 3);
  const Tensor weight = tensor(w, {K});
  expect_same_at_1_and_2([&] { return Tensors{leaf({N, K})}; },
                         [&](const Tensors& v) {
                           return Tensors{
                               cross_entropy(v[0], targets),
                               cross_entropy(v[0], targets,
                                             CrossEntropyOptions().label_smoothing(0.1f).weight(weight)),
                               cross_entropy(v[0], targets,
                                             CrossEntropyOptions().reduction(Reduction::None))};
                         });
  // (N, K, d): the class dim in the middle.
  const Indices t3(std::vector<int64_t>(static_cast<size_t>(60 * 9), 3), {60, 9});
  expect_same_at_1_and_2([&] { return Tensors{leaf({60, K, 9})}; },
                         [&](const Tensors& v) { return Tensors{cross_entropy(v[0], t3)}; });
}

TEST_F(Threads, ReferenceAttention) {
  // Not causal, with an additive mask: the reference kernel (scores, mask, softmax, dS by rows).
  auto make = [] { return Tensors{leaf({4, 4, 64, 32}), leaf({4, 4, 64, 32}), leaf({4, 4, 64, 32}),
                                  leaf({64, 64})}; };
  expect_same_at_1_and_2(make, [](const Tensors& v) {
    return Tensors{scaled_dot_product_attention(v[0], v[1], v[2], AttnMask::additive(v[3]))};
  });
  // Causal with dropout: the reference kernel too (the fused one has no dropout).
  expect_same_at_1_and_2(
      [] { return Tensors{leaf({4, 4, 64, 32}), leaf({4, 4, 64, 32}), leaf({4, 4, 64, 32})}; },
      [](const Tensors& v) {
        return Tensors{scaled_dot_product_attention(v[0], v[1], v[2], AttnMask(), true, 0.2f, true)};
      });
}

// ---- a training step ------------------------------------------------------------------------

TEST_F(Threads, TransformerBlockStepWithAdamW) {
  // Forward, backward and an AdamW step of a pre-LN block (d 128, 4 heads, d_ff 512, causal,
  // B 8, T 64): the parameters after the step and the loss, bit for bit at 1 and 2 threads.
  auto step = [](int threads, uint64_t& jobs) {
    tg::set_num_threads(threads);
    manual_seed(5);
    auto block = std::make_shared<nn::TransformerBlock>(128, 4, 512);
    optim::AdamW opt(block->parameters(), optim::AdamWOptions(1e-2));
    const Tensor x = randn({8, 64, 128});
    const uint64_t before = detail::pool_jobs();
    const Tensor y = block->forward(x, nn::AttentionForwardOptions().causal(true));
    const Tensor loss = (y * y).mean();
    loss.backward();
    opt.step();
    jobs = detail::pool_jobs() - before;
    Tensors out{loss.detach()};
    for (const Tensor& p : block->parameters()) out.push_back(p.detach().clone());
    return out;
  };
  uint64_t jobs1 = 0, jobs2 = 0;
  const Tensors one = step(1, jobs1), two = step(2, jobs2);
  EXPECT_EQ(jobs1, 0u);
  EXPECT_GT(jobs2, 10u);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(same_bits(two[i], one[i])) << "tensor " << i;
}
