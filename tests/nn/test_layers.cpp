// The simple layers (Linear, Embedding, LayerNorm, Dropout, activations, Sequential,
// ModuleList): gradient checks through every forward, PyTorch reference values for outputs
// and every gradient (tests/reference/make_nn.py), and each module's own contract.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include "reference.h"
#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;
using Inputs = std::vector<Tensor>;

namespace {

class NnLayers : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(42); }
};

// Random values in [lo, hi) kept away from 0 (the kink of relu), requiring a gradient.
Tensor input(const Shape& s, float lo = -1.5f, float hi = 1.5f) { return test_util::random_input(s, lo, hi); }

// gradcheck of a module: the input (if any) and every parameter of the module.
void check_module(nn::Module& m, const std::function<Tensor()>& forward, Inputs extra = {},
                  GradcheckOptions opt = GradcheckOptions()) {
  Inputs all = extra;
  for (auto& p : m.parameters()) all.push_back(p);
  ASSERT_FALSE(all.empty());
  const auto r = gradcheck([&](const Inputs&) { return forward(); }, all, opt);
  EXPECT_TRUE(r.ok) << m.type_name() << ": " << r.message;
}

std::string file(const std::string& name, const std::string& key) {
  return "nn/" + name + "." + key + ".npy";
}

// Loads every state_dict entry of case `name` into m by its dotted name; checks the count.
void load_params(const std::string& name, nn::Module& m) {
  const auto named = m.named_parameters();
  const auto n = ref::load_indices(file(name, "nparams"));
  ASSERT_EQ(n.numel(), 1);
  ASSERT_EQ(static_cast<int64_t>(named.size()), n.values[0]) << name << ": parameter count";
  for (const auto& [key, t] : named) {
    const Tensor value = ref::load(file(name, "param." + key));
    ASSERT_EQ(t.shape(), value.shape()) << name << ": " << key;
    NoGradGuard no_grad;  // as PyTorch users set parameters, under torch.no_grad()
    t.copy_(value);
    t.set_grad(Tensor());
  }
}

// After y.backward(g): y, dx (if x is given) and the gradient of every named parameter.
void expect_reference(const std::string& name, nn::Module& m, const Tensor& y, const Tensor& x,
                      double atol = 1e-5, double rtol = 1e-5) {
  EXPECT_TRUE(ref::close(y, ref::load(file(name, "y")), atol, rtol)) << name << ": forward";
  y.backward(ref::load(file(name, "g")));
  if (x.defined())
    EXPECT_TRUE(ref::close(x.grad(), ref::load(file(name, "dx")), atol, rtol)) << name << ": dx";
  for (const auto& [key, t] : m.named_parameters())
    EXPECT_TRUE(ref::close(t.grad(), ref::load(file(name, "grad." + key)), atol, rtol))
        << name << ": gradient of " << key;
}

void reference_case(const std::string& name, nn::UnaryModule& m, double atol = 1e-5) {
  SCOPED_TRACE(name);
  load_params(name, m);
  const Tensor x = ref::load(file(name, "x"), /*requires_grad=*/true);
  expect_reference(name, m, m.forward(x), x, atol);
}

void reference_case(const std::string& name, nn::Embedding& m) {
  SCOPED_TRACE(name);
  load_params(name, m);
  expect_reference(name, m, m.forward(ref::load_indices(file(name, "ids"))), Tensor());
}

// Rank of a row-major (rows, cols) matrix: Gaussian elimination with partial pivoting in
// double, a pivot counting when it exceeds 1e-9 times the largest entry.
int64_t matrix_rank(const Tensor& w) {
  const int64_t rows = w.size(0), cols = w.size(1);
  const std::vector<float> values = w.to_vector();
  std::vector<double> a(values.begin(), values.end());
  double biggest = 0;
  for (double v : a) biggest = std::max(biggest, std::abs(v));
  const double tol = 1e-9 * biggest * static_cast<double>(std::max(rows, cols));
  int64_t rank = 0;
  for (int64_t c = 0; c < cols && rank < rows; ++c) {
    int64_t piv = rank;
    for (int64_t r = rank + 1; r < rows; ++r)
      if (std::abs(a[r * cols + c]) > std::abs(a[piv * cols + c])) piv = r;
    if (std::abs(a[piv * cols + c]) <= tol) continue;
    for (int64_t k = 0; k < cols; ++k) std::swap(a[rank * cols + k], a[piv * cols + k]);
    for (int64_t r = rank + 1; r < rows; ++r) {
      const double f = a[r * cols + c] / a[rank * cols + c];
      for (int64_t k = c; k < cols; ++k) a[r * cols + k] -= f * a[rank * cols + k];
    }
    ++rank;
  }
  return rank;
}

}  // namespace

// ---- PyTorch reference values --------------------------------------------------------------

TEST_F(NnLayers, LinearMatchesPyTorch) {
  for (const char* name : {"linear_2d", "linear_3d"}) {
    nn::Linear lin(4, 3);
    reference_case(name, lin);
  }
  for (const char* name : {"linear_2d_nobias", "linear_3d_nobias"}) {
    nn::Linear lin(nn::LinearOptions(4, 3).bias(false));
    reference_case(name, lin);
  }
}

TEST_F(NnLayers, EmbeddingMatchesPyTorch) {
  nn::Embedding pad(nn::EmbeddingOptions(7, 3).padding_idx(0));
  reference_case("embedding_pad", pad);
  nn::Embedding negpad(nn::EmbeddingOptions(6, 4).padding_idx(-2));
  reference_case("embedding_negpad", negpad);
  nn::Embedding plain(5, 2);
  reference_case("embedding_3d", plain);
}

TEST_F(NnLayers, LayerNormMatchesPyTorch) {
  nn::LayerNorm last(6);
  reference_case("layernorm_last", last);
  nn::LayerNorm last2(nn::LayerNormOptions({3, 4}).eps(1e-3f));
  reference_case("layernorm_last2", last2);
  nn::LayerNorm plain(nn::LayerNormOptions({5}).elementwise_affine(false));
  reference_case("layernorm_noaffine", plain);
}

TEST_F(NnLayers, SequentialOfActivationsMatchesPyTorch) {
  nn::Sequential seq(std::make_shared<nn::Linear>(4, 8),
                     std::make_shared<nn::GELU>(nn::GELUOptions().approximate("tanh")),
                     std::make_shared<nn::LayerNorm>(8), std::make_shared<nn::Linear>(8, 6),
                     std::make_shared<nn::Tanh>(), std::make_shared<nn::Linear>(6, 5),
                     std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(5, 3),
                     std::make_shared<nn::Sigmoid>(), std::make_shared<nn::GELU>());
  reference_case("sequential", seq);
}

// ---- gradient checks through every module's forward ----------------------------------------

TEST_F(NnLayers, GradcheckLinear) {
  nn::Linear lin(4, 3);
  const Tensor x = input({2, 3, 4});
  check_module(lin, [&] { return lin.forward(x); }, {x});
  nn::Linear nobias(nn::LinearOptions(3, 2).bias(false));
  const Tensor x2 = input({5, 3});
  check_module(nobias, [&] { return nobias.forward(x2); }, {x2});
}

TEST_F(NnLayers, GradcheckEmbedding) {
  // No padding_idx here: the padding row is used forward but (by design) gets no gradient,
  // which a finite difference would flag; EmbeddingInitAndPadding tests that row instead.
  nn::Embedding emb(6, 3);
  const Indices ids({0, 2, 5, 5, 1, 2}, {2, 3});
  check_module(emb, [&] { return emb.forward(ids); });
}

TEST_F(NnLayers, GradcheckLayerNorm) {
  nn::LayerNorm ln(nn::LayerNormOptions({3, 4}));
  for (auto& p : ln.parameters()) p.data().assign(input(p.shape()).to_vector());
  const Tensor x = input({2, 3, 4});
  check_module(ln, [&] { return ln.forward(x); }, {x});
  nn::LayerNorm plain(nn::LayerNormOptions({5}).elementwise_affine(false));
  const Tensor x2 = input({3, 5});
  check_module(plain, [&] { return plain.forward(x2); }, {x2});
}

TEST_F(NnLayers, GradcheckDropoutWithAFixedMask) {
  nn::Dropout drop(0.3f);
  const Tensor x = input({4, 5});
  // Reseeding before each forward keeps the mask fixed across the finite differences.
  check_module(drop, [&] { manual_seed(3); return drop.forward(x); }, {x});
}

TEST_F(NnLayers, GradcheckActivations) {
  const Tensor x = input({3, 4});
  nn::ReLU relu;
  nn::Tanh tanh_;
  nn::Sigmoid sigmoid_;
  nn::GELU gelu_exact;
  nn::GELU gelu_tanh(nn::GELUOptions().approximate("tanh"));
  for (nn::UnaryModule* m : std::initializer_list<nn::UnaryModule*>{&relu, &tanh_, &sigmoid_,
                                                                    &gelu_exact, &gelu_tanh})
    check_module(*m, [&] { return m->forward(x); }, {x});
}

TEST_F(NnLayers, GradcheckSequential) {
  nn::Sequential seq(std::make_shared<nn::Linear>(3, 5), std::make_shared<nn::Tanh>(),
                     std::make_shared<nn::LayerNorm>(5), std::make_shared<nn::Linear>(5, 2));
  const Tensor x = input({4, 3});
  check_module(seq, [&] { return seq.forward(x); }, {x});
}

// ---- Linear --------------------------------------------------------------------------------

TEST_F(NnLayers, Linear768x64HasFullRank) {
  nn::Linear lin(nn::LinearOptions(768, 64).bias(false));
  EXPECT_EQ(lin.num_parameters(), 49152);
  EXPECT_EQ(lin.parameters().size(), 1u);
  EXPECT_FALSE(lin.bias.defined());
  EXPECT_EQ(lin.weight.shape(), (Shape{64, 768}));
  EXPECT_EQ(matrix_rank(lin.weight), 64);
  // The rank routine does see a dependent row: row 5 = row 1 + 2·row 2.
  const Tensor w = lin.weight.clone();
  for (int64_t k = 0; k < 768; ++k) w.data()(5, k) = w.data()(1, k) + 2.0f * w.data()(2, k);
  EXPECT_EQ(matrix_rank(w), 63);
}

TEST_F(NnLayers, TwoStackedLinearsEqualOneWithTheProductWeight) {
  for (bool bias : {true, false}) {
    nn::Linear l1(nn::LinearOptions(5, 4).bias(bias)), l2(nn::LinearOptions(4, 3).bias(bias));
    if (bias) {  // non-zero biases, so W2 b1 + b2 is exercised
      nn::init::normal_(l1.bias);
      nn::init::normal_(l2.bias);
    }
    nn::Linear one(nn::LinearOptions(5, 3).bias(bias));
    NoGradGuard no_grad;
    one.weight.copy_(matmul(l2.weight, l1.weight));                    // W = W2 W1
    if (bias) one.bias.copy_(linear(l1.bias, l2.weight, l2.bias));     // b = W2 b1 + b2
    const Tensor x = randn({2, 7, 5});
    EXPECT_TRUE(ref::close(l2.forward(l1.forward(x)), one.forward(x), 1e-5, 1e-5)) << bias;
  }
}

TEST_F(NnLayers, LinearIsAUnaryModule) {
  std::shared_ptr<nn::UnaryModule> m = std::make_shared<nn::Linear>(3, 2);
  EXPECT_EQ(m->forward(ones({4, 3})).shape(), (Shape{4, 2}));
  EXPECT_EQ((*m)(ones({3})).shape(), (Shape{2}));
}

// ---- Embedding -----------------------------------------------------------------------------

TEST_F(NnLayers, EmbeddingInitAndPadding) {
  nn::Embedding emb(nn::EmbeddingOptions(1000, 64).padding_idx(-1));
  EXPECT_EQ(*emb.options.padding_idx(), 999);  // normalised as PyTorch does
  EXPECT_EQ(emb.weight.shape(), (Shape{1000, 64}));
  // N(0, 1) everywhere but the padding row, which is zero.
  double s = 0, s2 = 0;
  const auto w = emb.weight.to_vector();
  for (int64_t i = 0; i < 999 * 64; ++i) {
    s += w[i];
    s2 += double(w[i]) * w[i];
  }
  const double n = 999 * 64, mean = s / n, var = s2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(var, 1.0, 0.03);
  for (int64_t k = 0; k < 64; ++k) EXPECT_EQ(emb.weight.data()(999, k), 0.0f);

  // The padding row gets no gradient; repeated ids add up.
  nn::Embedding small(nn::EmbeddingOptions(4, 2).padding_idx(1));
  sum(small.forward(Indices({1, 3, 3, 1, 0}))).backward();
  EXPECT_EQ(small.weight.grad().to_vector(), (std::vector<float>{1, 1, 0, 0, 0, 0, 2, 2}));
  EXPECT_EQ(small.extra_repr(), "4, 2, padding_idx=1");
}

TEST_F(NnLayers, EmbeddingErrorsNameTheModule) {
  struct Net : nn::Module {
    std::shared_ptr<nn::Embedding> tok;
    Net() : Module("Net") { tok = register_module("tok", std::make_shared<nn::Embedding>(5, 3)); }
  };
  auto net = std::make_shared<Net>();
  try {
    net->tok->forward(Indices({{0, 2, 5, 1}, {2, 2}}));
    FAIL() << "no error for id 5";
  } catch (const IndexError& e) {
    EXPECT_STREQ(e.what(),
                 "tok (Embedding 5×3): id 5 at flat position 2 of ids shape [2, 2] is out of range [0, 5)");
  }
  EXPECT_THROW(net->tok->forward(Indices({-1})), IndexError);
  EXPECT_THROW(nn::Embedding(nn::EmbeddingOptions(5, 3).padding_idx(5)), ValueError);
  EXPECT_THROW(nn::Embedding(nn::EmbeddingOptions(5, 3).padding_idx(-6)), ValueError);
  EXPECT_NO_THROW(nn::Embedding(nn::EmbeddingOptions(5, 3).padding_idx(-5)));
  EXPECT_THROW(nn::Embedding(0, 3), ValueError);
}

// ---- LayerNorm -----------------------------------------------------------------------------

TEST_F(NnLayers, LayerNormParametersAndErrors) {
  struct Block : nn::Module {
    std::shared_ptr<nn::LayerNorm> ln1;
    Block() : Module("Block") { ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(8)); }
  };
  auto block = std::make_shared<Block>();
  std::vector<std::string> names;
  for (auto& [n, t] : block->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"ln1.weight", "ln1.bias"}));
  EXPECT_EQ(block->ln1->weight.to_vector(), std::vector<float>(8, 1.0f));
  EXPECT_EQ(block->ln1->bias.to_vector(), std::vector<float>(8, 0.0f));
  try {
    block->ln1->forward(zeros({2, 5, 6}));
    FAIL() << "no error for a trailing dim of 6";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(), "ln1 (LayerNorm [8]): input shape [2, 5, 6] does not end with normalized_shape [8]");
  }
  nn::LayerNorm plain(nn::LayerNormOptions({4}).elementwise_affine(false));
  EXPECT_EQ(plain.num_parameters(), 0);
  EXPECT_FALSE(plain.weight.defined());
  // Each normalised row has mean 0 and (biased) variance 1.
  const auto y = plain.forward(tensor({{1, 2, 3, 4}, {-5, 0, 5, 10}})).to_vector();
  for (int r = 0; r < 2; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < 4; ++i) m += y[r * 4 + i] / 4.0;
    for (int i = 0; i < 4; ++i) v += (y[r * 4 + i] - m) * (y[r * 4 + i] - m) / 4.0;
    EXPECT_NEAR(m, 0.0, 1e-6);
    EXPECT_NEAR(v, 1.0, 1e-4);
  }
  EXPECT_THROW(nn::LayerNorm(nn::LayerNormOptions({})), ValueError);
  EXPECT_THROW(nn::LayerNorm(nn::LayerNormOptions({0})), ValueError);
}

// ---- Dropout -------------------------------------------------------------------------------

TEST_F(NnLayers, DropoutTrainingAndEval) {
  nn::Dropout drop(nn::DropoutOptions(0.25f));
  const Tensor x = full({500, 400}, 2.0f);
  const auto y = drop.forward(x).to_vector();
  int64_t zeros_ = 0;
  for (float v : y) {
    if (v == 0.0f) ++zeros_;
    else EXPECT_FLOAT_EQ(v, 2.0f / 0.75f);  // survivors scaled by 1/(1-p)
  }
  // 200,000 Bernoulli(0.25) draws: the fraction dropped is within 5 sigma (~0.005) of p.
  EXPECT_NEAR(double(zeros_) / double(y.size()), 0.25, 0.005);

  drop.eval();
  EXPECT_FALSE(drop.is_training());
  EXPECT_EQ(drop.forward(x).to_vector(), x.to_vector());
  drop.train();
  EXPECT_NE(drop.forward(x).to_vector(), x.to_vector());
}

TEST_F(NnLayers, DropoutIsReproducibleUnderManualSeed) {
  nn::Dropout drop(0.5f);
  const Tensor x = randn({64, 32});
  manual_seed(7);
  const auto a = drop.forward(x).to_vector();
  const auto b = drop.forward(x).to_vector();
  manual_seed(7);
  EXPECT_EQ(drop.forward(x).to_vector(), a);
  EXPECT_NE(a, b);  // successive masks differ
}

TEST_F(NnLayers, DropoutProbabilities) {
  EXPECT_THROW(nn::Dropout(-0.1f), ValueError);
  EXPECT_THROW(nn::Dropout(1.5f), ValueError);
  EXPECT_THROW(nn::Dropout(std::nanf("")), ValueError);
  const Tensor x = randn({10, 10});
  nn::Dropout none(0.0f), all(1.0f);
  EXPECT_EQ(none.forward(x).to_vector(), x.to_vector());
  EXPECT_EQ(all.forward(x).to_vector(), std::vector<float>(100, 0.0f));  // as PyTorch: p = 1 drops all
  EXPECT_EQ(nn::Dropout().options.p(), 0.5f);
  EXPECT_EQ(nn::Dropout(0.1f).extra_repr(), "p=0.1");
}

// ---- activations ---------------------------------------------------------------------------

TEST_F(NnLayers, ActivationsComputeTheirFunctions) {
  const std::vector<float> xs = {-2.0f, -0.5f, 0.0f, 0.3f, 1.7f};
  const Tensor x = tensor(xs, {5});
  const auto relu = nn::ReLU().forward(x).to_vector();
  const auto th = nn::Tanh().forward(x).to_vector();
  const auto sg = nn::Sigmoid().forward(x).to_vector();
  const auto ge = nn::GELU().forward(x).to_vector();
  const auto gt = nn::GELU(nn::GELUOptions().approximate("tanh")).forward(x).to_vector();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    EXPECT_FLOAT_EQ(relu[i], float(std::max(v, 0.0)));
    EXPECT_NEAR(th[i], std::tanh(v), 1e-6);
    EXPECT_NEAR(sg[i], 1.0 / (1.0 + std::exp(-v)), 1e-6);
    EXPECT_NEAR(ge[i], 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))), 1e-6);
    const double k = std::sqrt(2.0 / M_PI);
    EXPECT_NEAR(gt[i], 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v))), 1e-6);
  }
  EXPECT_THROW(nn::GELU(nn::GELUOptions().approximate("erf")), ValueError);
  EXPECT_EQ(nn::GELU().extra_repr(), "approximate=none");
  EXPECT_EQ(nn::ReLU().repr(), "ReLU()\nTotal parameters: 0");
}

// ---- Sequential and ModuleList -------------------------------------------------------------

TEST_F(NnLayers, SequentialNamesAndOrder) {
  auto l0 = std::make_shared<nn::Linear>(3, 4);
  auto l2 = std::make_shared<nn::Linear>(4, 2);
  nn::Sequential seq(l0, std::make_shared<nn::ReLU>());
  seq.push_back(l2);
  ASSERT_EQ(seq.size(), 3u);
  std::vector<std::string> names;
  for (auto& [n, t] : seq.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_TRUE(seq.find("2.weight").is_same(l2->weight));
  EXPECT_EQ(seq[1]->type_name(), "ReLU");
  EXPECT_EQ(seq.at<nn::Linear>(2), l2);
  EXPECT_THROW(seq.at<nn::Linear>(1), ValueError);
  EXPECT_THROW(seq[3], IndexError);

  // Applied in order: relu between the two linears (the other order gives another result).
  nn::init::normal_(l0.get()->bias);
  const Tensor x = randn({5, 3});
  EXPECT_TRUE(ref::close(seq.forward(x), l2->forward(relu(l0->forward(x))), 0, 0));
  EXPECT_FALSE(ref::close(seq.forward(x), relu(l2->forward(l0->forward(x))), 1e-3, 0));
  int count = 0;
  for (const auto& m : seq) count += m->num_parameters() > 0;
  EXPECT_EQ(count, 2);

  // Empty: the identity. Named entries, and nesting with paths in errors.
  nn::Sequential empty;
  EXPECT_TRUE(empty.forward(x).is_same(x));
  auto outer = std::make_shared<nn::Sequential>();
  auto inner = outer->push_back("mlp", std::make_shared<nn::Sequential>(std::make_shared<nn::LayerNorm>(4)));
  outer->push_back("head", std::make_shared<nn::Linear>(4, 2));
  EXPECT_EQ(outer->named_parameters()[0].first, "mlp.0.weight");
  EXPECT_EQ(inner->at<nn::LayerNorm>(0)->path(), "mlp.0");
  try {
    outer->forward(zeros({2, 3}));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("mlp.0 (LayerNorm [4]): ", 0), 0u) << e.what();
  }
  EXPECT_THROW(outer->push_back("head", std::make_shared<nn::ReLU>()), ValueError);  // name taken
}

TEST_F(NnLayers, SequentialRepr) {
  nn::Sequential seq(std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::GELU>(),
                     std::make_shared<nn::Dropout>(0.1f), std::make_shared<nn::LayerNorm>(4));
  const std::string r = seq.repr();
  EXPECT_EQ(r,
            "Sequential()  # 24 params\n"
            "  (0): Linear(in_features=3, out_features=4, bias=true)  # 16 params\n"
            "    weight: [4, 3]\n"
            "    bias: [4]\n"
            "  (1): GELU(approximate=none)\n"
            "  (2): Dropout(p=0.1)\n"
            "  (3): LayerNorm([4], eps=1e-05, elementwise_affine=true)  # 8 params\n"
            "    weight: [4]\n"
            "    bias: [4]\n"
            "Total parameters: 24");
}

TEST_F(NnLayers, SequentialTrainEvalReachesDropout) {
  auto drop = std::make_shared<nn::Dropout>(0.9f);
  nn::Sequential seq(std::make_shared<nn::Tanh>(), drop);
  seq.eval();
  EXPECT_FALSE(drop->is_training());
  const Tensor x = randn({20});
  EXPECT_TRUE(ref::close(seq.forward(x), tanh(x), 0, 0));
}

// ---- Sequential: Linear + ReLU / exact GELU as one op ------------------------------------------

/// y and the gradients of x and every parameter after sum(y · g), for a fixed g.
struct Pass {
  Tensor y;
  std::vector<Tensor> grads;
};
Pass forward_backward(nn::Module& m, const std::function<Tensor()>& forward, const Tensor& x) {
  m.zero_grad(true);
  x.zero_grad();
  Pass r;
  r.y = forward();
  manual_seed(5);
  sum(r.y * randn(r.y.shape())).backward();
  r.grads.push_back(x.grad());
  for (const Tensor& p : m.parameters()) r.grads.push_back(p.grad());
  return r;
}

// The fused pairs give what the modules one by one give, bit for bit: values, the input's
// gradient and every parameter's; with and without bias, 2-D and 3-D inputs. The last op's
// name shows the fusion ran.
TEST_F(NnLayers, SequentialRunsLinearAndActivationAsOneOpBitForBit) {
  for (const bool bias : {true, false}) {
    auto l0 = std::make_shared<nn::Linear>(nn::LinearOptions(5, 7).bias(bias));
    auto l2 = std::make_shared<nn::Linear>(7, 6);
    auto l4 = std::make_shared<nn::Linear>(6, 3);
    if (bias) nn::init::normal_(l0->bias);
    nn::init::normal_(l2->bias);
    nn::Sequential seq(l0, std::make_shared<nn::ReLU>(), l2, std::make_shared<nn::GELU>(), l4,
                       std::make_shared<nn::ReLU>());
    for (const Shape& shape : {Shape{4, 5}, Shape{2, 3, 5}}) {
      SCOPED_TRACE("bias " + std::to_string(bias) + ", input " + to_string(shape));
      const Tensor x = input(shape);
      const Pass fused = forward_backward(seq, [&] { return seq.forward(x); }, x);
      EXPECT_EQ(fused.y.op_name(), "linear_relu");
      const Pass apart = forward_backward(seq, [&] {
        const Tensor h1 = relu(linear(x, l0->weight, l0->bias));
        return relu(linear(gelu(linear(h1, l2->weight, l2->bias)), l4->weight, l4->bias));
      }, x);
      EXPECT_EQ(apart.y.op_name(), "relu");
      EXPECT_TRUE(test_util::same_bits(fused.y, apart.y));
      ASSERT_EQ(fused.grads.size(), apart.grads.size());
      for (size_t i = 0; i < fused.grads.size(); ++i)
        EXPECT_TRUE(test_util::same_bits(fused.grads[i], apart.grads[i])) << "gradient " << i;
    }
  }
}

TEST_F(NnLayers, GradcheckSequentialWithFusedPairs) {
  nn::Sequential seq(std::make_shared<nn::Linear>(3, 5), std::make_shared<nn::GELU>(),
                     std::make_shared<nn::Linear>(5, 4), std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::Linear>(4, 2));
  for (auto& p : seq.parameters()) p.data().assign(input(p.shape()).to_vector());
  const Tensor x = input({4, 3});
  check_module(seq, [&] { return seq.forward(x); }, {x});
}

// Where something could tell, the modules run one by one: a Linear subclass whose forward
// does more, a GELU with the tanh form, and anomaly detection on (whose reports name each op).
TEST_F(NnLayers, SequentialRunsModulesOneByOneWhereTheFusionWouldShow) {
  struct ScaledLinear : nn::Linear {
    ScaledLinear() : nn::Linear(3, 4) {}
    Tensor forward(const Tensor& x) override { return nn::Linear::forward(x) * 2.0f; }
  };
  auto scaled = std::make_shared<ScaledLinear>();
  nn::init::normal_(scaled->bias);
  const Tensor x = input({5, 3});
  nn::Sequential custom(scaled, std::make_shared<nn::ReLU>());
  const Tensor doubled = linear(x, scaled->weight, scaled->bias) * 2.0f;
  EXPECT_TRUE(test_util::same_bits(custom.forward(x), relu(doubled)));

  auto lin = std::make_shared<nn::Linear>(3, 4);
  nn::Sequential tanh_gelu(lin, std::make_shared<nn::GELU>(nn::GELUOptions().approximate("tanh")));
  EXPECT_EQ(tanh_gelu.forward(x).op_name(), "gelu_tanh");

  nn::Sequential plain(lin, std::make_shared<nn::ReLU>());
  EXPECT_EQ(plain.forward(x).op_name(), "linear_relu");
  DetectAnomalyGuard anomaly;
  const Tensor y = plain.forward(x);
  EXPECT_EQ(y.op_name(), "relu");
  EXPECT_TRUE(test_util::same_bits(y, relu(linear(x, lin->weight, lin->bias))));
}

// Regression: an input a fused Linear does not take is an error naming that Linear's path, as
// without the fusion, wherever the pair sits; and a wrong dtype is the Linear's own error.
TEST_F(NnLayers, SequentialFusedPairErrorsNameTheLinear) {
  auto root = std::make_shared<nn::Module>("Root");
  auto seq = root->register_module(
      "mlp", std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(3, 4),
                                              std::make_shared<nn::ReLU>(),
                                              std::make_shared<nn::Linear>(5, 2),
                                              std::make_shared<nn::GELU>()));
  test_util::expect_error<ShapeError>([&] { seq->forward(ones({2, 2})); },
                           {"mlp.0 (Linear 3→4)", "input last dim 2", "expected 3"});
  test_util::expect_error<ShapeError>([&] { seq->forward(ones({2, 3})); },
                           {"mlp.2 (Linear 5→2)", "input last dim 4", "expected 5"});
  test_util::expect_error<ShapeError>([&] { seq->forward(scalar(1.0f)); },
                                      {"mlp.0 (Linear 3→4)", "0-d"});
  test_util::expect_error<ValueError>([&] { seq->forward(Tensor()); },
                                      {"mlp.0 (Linear 3→4)", "undefined"});
  const Tensor ids = zeros({2, 3}).to(kInt64);
  std::string alone, in_seq;
  try {
    seq->at<nn::Linear>(0)->forward(ids);
  } catch (const TypeError& e) {
    alone = e.what();
  }
  try {
    seq->forward(ids);
  } catch (const TypeError& e) {
    in_seq = e.what();
  }
  EXPECT_FALSE(alone.empty());
  EXPECT_EQ(in_seq, alone);
  // A weight replaced by one of another shape: the same error as the Linear alone gives.
  seq->at<nn::Linear>(0)->weight = randn({4, 5}, true);
  alone.clear();
  in_seq.clear();
  try {
    seq->at<nn::Linear>(0)->forward(ones({2, 3}));
  } catch (const ShapeError& e) {
    alone = e.what();
  }
  try {
    seq->forward(ones({2, 3}));
  } catch (const ShapeError& e) {
    in_seq = e.what();
  }
  EXPECT_FALSE(alone.empty());
  EXPECT_EQ(in_seq, alone);
}

TEST_F(NnLayers, ModuleList) {
  struct Net : nn::Module {
    std::shared_ptr<nn::ModuleList> blocks;
    Net() : Module("Net") {
      blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
      blocks->push_back(std::make_shared<nn::Linear>(4, 4));
      blocks->push_back(std::make_shared<nn::Embedding>(3, 4));
      blocks->push_back(std::make_shared<nn::LayerNorm>(4));
    }
  };
  auto net = std::make_shared<Net>();
  ASSERT_EQ(net->blocks->size(), 3u);
  std::vector<std::string> names;
  for (auto& [n, t] : net->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"blocks.0.weight", "blocks.0.bias", "blocks.1.weight",
                                             "blocks.2.weight", "blocks.2.bias"}));
  EXPECT_EQ(net->blocks->at<nn::Embedding>(1)->path(), "blocks.1");
  EXPECT_THROW(net->blocks->at<nn::Linear>(1), ValueError);
  EXPECT_THROW((*net->blocks)[3], IndexError);
  std::vector<std::string> types;
  for (const auto& m : *net->blocks) types.push_back(m->type_name());
  EXPECT_EQ(types, (std::vector<std::string>{"Linear", "Embedding", "LayerNorm"}));
  EXPECT_NE(net->repr().find("(blocks): ModuleList()  # 40 params\n    (0): Linear("), std::string::npos)
      << net->repr();

  nn::ModuleList list(std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(2, 2));
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(list.named_parameters()[0].first, "1.weight");
}

// ---- the README's guide ----------------------------------------------------------------------

TEST(Guide, ReadmeModuleIsTheCompiledExample) {
  auto read = [](const std::string& rel) {
    std::ifstream in(std::string(TAPEGRAD_SOURCE_DIR) + "/" + rel);
    EXPECT_TRUE(in.good()) << rel;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string readme = read("README.md"), example = read("examples/custom_module.cpp");
  const auto section = readme.find("## Writing a new module");
  ASSERT_NE(section, std::string::npos);
  const auto begin = readme.find("```cpp\n", section);
  ASSERT_NE(begin, std::string::npos);
  const auto end = readme.find("```", begin + 7);
  const std::string code = readme.substr(begin + 7, end - begin - 7);
  EXPECT_GT(std::count(code.begin(), code.end(), '\n'), 15);
  EXPECT_NE(example.find(code), std::string::npos)
      << "the README's module differs from examples/custom_module.cpp";
}
