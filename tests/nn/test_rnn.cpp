// Recurrent layers: gradient checks through every cell and sequence module, PyTorch reference
// values (tests/reference/make_rnn.py -> tests/fixtures/rnn/), the fused sequence modules against
// the cells unrolled by hand, the char-RNN classifier, names, init and errors.
//
// Legend: T = time, B = batch, C = input size, H = hidden size, L = layers.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "reference.h"
#include "tapegrad/tapegrad.h"

using namespace tg;
using Inputs = std::vector<Tensor>;
using NameMap = std::function<std::string(const std::string&)>;

namespace {

Tensor load(const std::string& name, bool requires_grad = false) {
  return ref::load("rnn/" + name + ".npy", requires_grad);
}

std::string same(const std::string& n) { return n; }

/// RNNCell's Linear submodules under PyTorch's nn.RNNCell names.
std::string torch_cell_name(const std::string& n) {
  static const std::vector<std::pair<std::string, std::string>> map = {
      {"i2h.weight", "weight_ih"}, {"i2h.bias", "bias_ih"},
      {"h2h.weight", "weight_hh"}, {"h2h.bias", "bias_hh"}};
  for (const auto& [ours, theirs] : map) {
    const auto at = n.find(ours);
    if (at != std::string::npos) return n.substr(0, at) + theirs;
  }
  return n;
}

size_t count_files(const std::string& prefix) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(ref::path("rnn")))
    if (e.path().filename().string().rfind(prefix, 0) == 0) ++n;
  return n;
}

/// Copies every parameter from <case>.param.<torch key>.npy; the module must have exactly
/// the parameters PyTorch's state_dict has.
void load_params(const nn::Module& m, const std::string& cas, const NameMap& map = same) {
  const auto params = m.named_parameters();
  EXPECT_EQ(params.size(), count_files(cas + ".param.")) << cas;
  NoGradGuard no_grad;  // parameters are set as PyTorch users do, under torch.no_grad()
  for (const auto& [name, p] : params) p.copy_(load(cas + ".param." + map(name)));
}

void expect_param_grads(const nn::Module& m, const std::string& cas, const NameMap& map = same) {
  for (const auto& [name, p] : m.named_parameters())
    EXPECT_TRUE(ref::close(p.grad(), load(cas + ".grad." + map(name))))
        << cas << " grad of " << name << " (" << map(name) << ")";
}

/// Σ g · out with the case's saved upstream gradient g_<key>.
Tensor projected(const std::string& cas, const std::string& key, const Tensor& out) {
  EXPECT_TRUE(ref::close(out, load(cas + "." + key))) << cas << " " << key;
  return sum(out * load(cas + ".g_" + key));
}

Tensor flat(const Tensor& t) { return reshape(t, {-1}); }

Tensor uniform_input(const Shape& s) {
  Tensor t = rand(s);
  for (float& v : t.data()) v = 2.0f * v - 1.0f;
  return t.requires_grad_();
}

void check(const std::function<Tensor(const Inputs&)>& fn, const Inputs& xs) {
  const auto r = gradcheck(fn, xs);
  EXPECT_TRUE(r.ok) << r.message;
}

Inputs with_params(Inputs xs, const nn::Module& m) {
  for (const Tensor& p : m.parameters()) xs.push_back(p);
  return xs;
}

class RNNTest : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(7); }
};

}  // namespace

// ---- gradient checks ------------------------------------------------------------------------

TEST_F(RNNTest, GradcheckCells) {
  for (const char* nl : {"tanh", "relu"}) {
    nn::RNNCell cell(nn::RNNCellOptions(3, 4).nonlinearity(nl));
    check([&](const Inputs& v) { return cell.forward(v[0], v[1]); },
          with_params({uniform_input({2, 3}), uniform_input({2, 4})}, cell));
  }
  nn::LSTMCell lstm(3, 4);
  check([&](const Inputs& v) {
    const auto s = lstm.forward(v[0], {v[1], v[2]});
    return cat({s.h, s.c}, -1);
  }, with_params({uniform_input({2, 3}), uniform_input({2, 4}), uniform_input({2, 4})}, lstm));
  nn::GRUCell gru(nn::GRUCellOptions(3, 4).bias(false));
  check([&](const Inputs& v) { return gru.forward(v[0], v[1]); },
        with_params({uniform_input({2, 3}), uniform_input({2, 4})}, gru));
  nn::GRUCell gru_b(3, 4);  // unbatched input, no initial state
  check([&](const Inputs& v) { return gru_b.forward(v[0]); }, with_params({uniform_input({3})}, gru_b));
}

TEST_F(RNNTest, GradcheckRNN) {
  for (const char* nl : {"tanh", "relu"}) {
    nn::RNN rnn(nn::RNNOptions(3, 4).num_layers(2).nonlinearity(nl));
    check([&](const Inputs& v) {
      const auto r = rnn.forward(v[0], v[1]);
      return cat({flat(r.output), flat(r.h_n)}, 0);
    }, with_params({uniform_input({5, 2, 3}), uniform_input({2, 2, 4})}, rnn));
  }
  nn::RNN bf(nn::RNNOptions(3, 4).batch_first(true).bias(false));
  check([&](const Inputs& v) {
    const auto r = bf.forward(v[0]);
    return cat({flat(r.output), flat(r.h_n)}, 0);
  }, with_params({uniform_input({2, 5, 3})}, bf));
}

TEST_F(RNNTest, GradcheckLSTM) {
  nn::LSTM lstm(nn::LSTMOptions(3, 4).num_layers(2));
  check([&](const Inputs& v) {
    const auto r = lstm.forward(v[0], {v[1], v[2]});
    return cat({flat(r.output), flat(r.h_n), flat(r.c_n)}, 0);
  }, with_params({uniform_input({5, 2, 3}), uniform_input({2, 2, 4}), uniform_input({2, 2, 4})}, lstm));
  nn::LSTM bf(nn::LSTMOptions(3, 4).batch_first(true).bias(false));
  check([&](const Inputs& v) {
    const auto r = bf.forward(v[0]);
    return cat({flat(r.output), flat(r.h_n), flat(r.c_n)}, 0);
  }, with_params({uniform_input({2, 4, 3})}, bf));
}

TEST_F(RNNTest, GradcheckGRU) {
  nn::GRU gru(nn::GRUOptions(3, 4).num_layers(2));
  check([&](const Inputs& v) {
    const auto r = gru.forward(v[0], v[1]);
    return cat({flat(r.output), flat(r.h_n)}, 0);
  }, with_params({uniform_input({5, 2, 3}), uniform_input({2, 2, 4})}, gru));
  nn::GRU bf(nn::GRUOptions(3, 4).batch_first(true).bias(false));
  check([&](const Inputs& v) { return flat(bf.forward(v[0]).output); },
        with_params({uniform_input({2, 4, 3})}, bf));
}

// ---- PyTorch reference values -----------------------------------------------------------------

namespace {

void cell_reference(nn::Module& cell, const std::string& cas,
                    const std::function<Tensor(const Tensor&, const Tensor&)>& fwd,
                    const NameMap& map = same) {
  load_params(cell, cas, map);
  const Tensor x = load(cas + ".x", true), h = load(cas + ".h0", true);
  projected(cas, "y", fwd(x, h)).backward();
  EXPECT_TRUE(ref::close(x.grad(), load(cas + ".dx"))) << cas;
  EXPECT_TRUE(ref::close(h.grad(), load(cas + ".dh0"))) << cas;
  expect_param_grads(cell, cas, map);
}

/// Runs a sequence module on the case's input (and states), compares outputs and every gradient.
template <class M>
void seq_reference(const M& m, const std::string& cas, bool states) {
  load_params(m, cas);
  const Tensor x = load(cas + ".x", true);
  const Tensor h0 = states ? load(cas + ".h0", true) : Tensor();
  Tensor loss;
  Tensor c0;
  if constexpr (std::is_same_v<M, nn::LSTM>) {
    c0 = states ? load(cas + ".c0", true) : Tensor();
    const auto r = m.forward(x, {h0, c0});
    loss = projected(cas, "y", r.output) + projected(cas, "h_n", r.h_n) + projected(cas, "c_n", r.c_n);
  } else {
    const auto r = m.forward(x, h0);
    loss = projected(cas, "y", r.output) + projected(cas, "h_n", r.h_n);
  }
  loss.backward();
  EXPECT_TRUE(ref::close(x.grad(), load(cas + ".dx"))) << cas;
  if (states) EXPECT_TRUE(ref::close(h0.grad(), load(cas + ".dh0"))) << cas;
  if (c0.defined()) EXPECT_TRUE(ref::close(c0.grad(), load(cas + ".dc0"))) << cas;
  expect_param_grads(m, cas);
}

}  // namespace

TEST(RNNReference, RNNCell) {
  nn::RNNCell cell(5, 4);
  cell_reference(cell, "rnncell", [&](const Tensor& x, const Tensor& h) { return cell.forward(x, h); },
                 torch_cell_name);
  nn::RNNCell relu(nn::RNNCellOptions(5, 4).bias(false).nonlinearity("relu"));
  cell_reference(relu, "rnncell_relu",
                 [&](const Tensor& x, const Tensor& h) { return relu.forward(x, h); }, torch_cell_name);
}

TEST(RNNReference, LSTMCell) {
  nn::LSTMCell cell(5, 4);
  load_params(cell, "lstmcell");
  const Tensor x = load("lstmcell.x", true), h = load("lstmcell.h0", true),
               c = load("lstmcell.c0", true);
  const auto s = cell.forward(x, {h, c});
  (projected("lstmcell", "y", s.h) + projected("lstmcell", "c", s.c)).backward();
  EXPECT_TRUE(ref::close(x.grad(), load("lstmcell.dx")));
  EXPECT_TRUE(ref::close(h.grad(), load("lstmcell.dh0")));
  EXPECT_TRUE(ref::close(c.grad(), load("lstmcell.dc0")));
  expect_param_grads(cell, "lstmcell");
}

TEST(RNNReference, GRUCell) {
  nn::GRUCell cell(5, 4);
  cell_reference(cell, "grucell", [&](const Tensor& x, const Tensor& h) { return cell.forward(x, h); });
}

TEST(RNNReference, RNN) {
  seq_reference(nn::RNN(nn::RNNOptions(5, 4).num_layers(2)), "rnn", true);
  seq_reference(nn::RNN(nn::RNNOptions(5, 4).num_layers(2).batch_first(true)), "rnn_bf", true);
  seq_reference(nn::RNN(nn::RNNOptions(5, 4).nonlinearity("relu").bias(false)), "rnn_relu", false);
  seq_reference(nn::RNN(nn::RNNOptions(3, 20)), "rnn_wide", true);
}

TEST(RNNReference, LSTM) {
  seq_reference(nn::LSTM(nn::LSTMOptions(5, 4).num_layers(2)), "lstm", true);
  seq_reference(nn::LSTM(nn::LSTMOptions(5, 4).batch_first(true).bias(false)), "lstm_bf", false);
  seq_reference(nn::LSTM(nn::LSTMOptions(3, 20)), "lstm_wide", true);
}

TEST(RNNReference, GRU) {
  seq_reference(nn::GRU(nn::GRUOptions(5, 4).num_layers(2)), "gru", true);
  seq_reference(nn::GRU(nn::GRUOptions(5, 4).num_layers(2).batch_first(true)), "gru_bf", false);
  seq_reference(nn::GRU(nn::GRUOptions(3, 20)), "gru_wide", true);
}

// ---- the char-RNN classifier ----------------------------------------------------------------

namespace {
/// The classic name classifier: h = tanh(i2h(x_t) + h2h(h)) over a word of one-hot letters,
/// then log_softmax(h2o(h_T)).
struct CharRNN : nn::Module {
  std::shared_ptr<nn::RNNCell> rnn;
  std::shared_ptr<nn::Linear> h2o;
  CharRNN(int64_t letters, int64_t hidden, int64_t classes) : Module("CharRNN") {
    rnn = register_module("rnn", std::make_shared<nn::RNNCell>(letters, hidden));
    h2o = register_module("h2o", std::make_shared<nn::Linear>(hidden, classes));
  }
  /// word (T, 1, letters) -> log-probabilities (1, classes)
  Tensor forward(const Tensor& word) const {
    Tensor h;
    for (int64_t t = 0; t < word.size(0); ++t) h = rnn->forward(squeeze(narrow(word, 0, t, 1), 0), h);
    return log_softmax(h2o->forward(h), 1);
  }
};
}  // namespace

TEST(RNNReference, CharRNNClassifier) {
  CharRNN model(57, 32, 18);
  load_params(model, "charrnn", torch_cell_name);
  const Tensor word = load("charrnn.x");
  ASSERT_EQ(word.shape(), (Shape{7, 1, 57}));
  const Tensor logp = model.forward(word);
  EXPECT_TRUE(ref::close(logp, load("charrnn.logp")));
  const Tensor loss = nll_loss(logp, ref::load_indices("rnn/charrnn.target.npy"));
  EXPECT_NEAR(loss.item(), load("charrnn.loss").item(), 1e-5);
  loss.backward();
  expect_param_grads(model, "charrnn", torch_cell_name);
}

// ---- the fused sequence modules equal the cells unrolled ----------------------------------------

namespace {
void copy_layer0(const nn::RNNBase& m, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                 const Tensor& b_hh) {
  NoGradGuard no_grad;
  w_ih.copy_(m.weight_ih[0]);
  w_hh.copy_(m.weight_hh[0]);
  b_ih.copy_(m.bias_ih[0]);
  b_hh.copy_(m.bias_hh[0]);
}

void expect_same_grads(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(ref::close(a[i].grad(), b[i].grad())) << i;
}
}  // namespace

TEST_F(RNNTest, SequenceModulesEqualUnrolledCells) {
  const int64_t T = 7, B = 3, C = 5, H = 24;  // H and B·H span full SIMD lanes and tails
  const Tensor g = randn({T, B, H});
  {
    nn::RNN rnn(C, H);
    nn::RNNCell cell(C, H);
    copy_layer0(rnn, cell.i2h->weight, cell.h2h->weight, cell.i2h->bias, cell.h2h->bias);
    const Tensor x = randn({T, B, C}, true), x2 = x.detach().clone().requires_grad_();
    const Tensor h0 = randn({1, B, H}, true), h02 = h0.detach().clone().requires_grad_();
    const auto r = rnn.forward(x, h0);
    std::vector<Tensor> hs;
    Tensor h = squeeze(h02, 0);
    for (int64_t t = 0; t < T; ++t) hs.push_back(h = cell.forward(squeeze(narrow(x2, 0, t, 1), 0), h));
    const Tensor y = reshape(cat(hs, 0), {T, B, H});
    EXPECT_TRUE(ref::close(r.output, y));
    sum(r.output * g).backward();
    sum(y * g).backward();
    EXPECT_TRUE(ref::close(x.grad(), x2.grad()));
    EXPECT_TRUE(ref::close(h0.grad(), h02.grad()));
    expect_same_grads(rnn.parameters(), {cell.i2h->weight, cell.h2h->weight, cell.i2h->bias,
                                         cell.h2h->bias});
  }
  {
    nn::LSTM lstm(C, H);
    nn::LSTMCell cell(C, H);
    copy_layer0(lstm, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh);
    const Tensor x = randn({T, B, C}, true), x2 = x.detach().clone().requires_grad_();
    const auto r = lstm.forward(x);
    std::vector<Tensor> hs;
    nn::LSTMState s;
    for (int64_t t = 0; t < T; ++t) {
      s = cell.forward(squeeze(narrow(x2, 0, t, 1), 0), s);
      hs.push_back(s.h);
    }
    const Tensor y = reshape(cat(hs, 0), {T, B, H});
    EXPECT_TRUE(ref::close(r.output, y));
    EXPECT_TRUE(ref::close(squeeze(r.c_n, 0), s.c));
    (sum(r.output * g) + sum(r.c_n)).backward();
    (sum(y * g) + sum(s.c)).backward();
    EXPECT_TRUE(ref::close(x.grad(), x2.grad()));
    expect_same_grads(lstm.parameters(), cell.parameters());
  }
  {
    nn::GRU gru(C, H);
    nn::GRUCell cell(C, H);
    copy_layer0(gru, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh);
    const Tensor x = randn({T, B, C}, true), x2 = x.detach().clone().requires_grad_();
    const auto r = gru.forward(x);
    std::vector<Tensor> hs;
    Tensor h;
    for (int64_t t = 0; t < T; ++t) hs.push_back(h = cell.forward(squeeze(narrow(x2, 0, t, 1), 0), h));
    const Tensor y = reshape(cat(hs, 0), {T, B, H});
    EXPECT_TRUE(ref::close(r.output, y));
    sum(r.output * g).backward();
    sum(y * g).backward();
    EXPECT_TRUE(ref::close(x.grad(), x2.grad()));
    expect_same_grads(gru.parameters(), cell.parameters());
  }
}

TEST_F(RNNTest, CellsMatchTheirEquationsWrittenWithOps) {
  const int64_t B = 3, C = 5, H = 24;
  const Tensor x = randn({B, C}, true), h = randn({B, H}, true), c = randn({B, H}, true);
  auto grads = [](const std::vector<Tensor>& ts) {
    std::vector<Tensor> g;
    for (const Tensor& t : ts) {
      g.push_back(t.grad().clone());
      t.set_grad(Tensor());
    }
    return g;
  };
  auto gate = [H](const Tensor& t, int64_t k) { return narrow(t, -1, k * H, H); };
  {
    nn::LSTMCell cell(C, H);
    const std::vector<Tensor> leaves = with_params({x, h, c}, cell);
    const auto s = cell.forward(x, {h, c});
    (sum(s.h * s.h) + sum(s.c * 0.5f)).backward();
    const auto fused = grads(leaves);
    const Tensor a = linear(x, cell.weight_ih, cell.bias_ih) + linear(h, cell.weight_hh, cell.bias_hh);
    const Tensor c2 = sigmoid(gate(a, 1)) * c + sigmoid(gate(a, 0)) * tanh(gate(a, 2));
    const Tensor h2 = sigmoid(gate(a, 3)) * tanh(c2);
    EXPECT_TRUE(ref::close(s.h, h2));
    EXPECT_TRUE(ref::close(s.c, c2));
    (sum(h2 * h2) + sum(c2 * 0.5f)).backward();
    const auto composed = grads(leaves);
    for (size_t i = 0; i < leaves.size(); ++i) EXPECT_TRUE(ref::close(fused[i], composed[i])) << i;
  }
  {
    nn::GRUCell cell(C, H);
    const std::vector<Tensor> leaves = with_params({x, h}, cell);
    const Tensor y = cell.forward(x, h);
    sum(y * y).backward();
    const auto fused = grads(leaves);
    const Tensor gi = linear(x, cell.weight_ih, cell.bias_ih), gh = linear(h, cell.weight_hh, cell.bias_hh);
    const Tensor r = sigmoid(gate(gi, 0) + gate(gh, 0)), z = sigmoid(gate(gi, 1) + gate(gh, 1));
    const Tensor n = tanh(gate(gi, 2) + r * gate(gh, 2));
    const Tensor y2 = (1.0f - z) * n + z * h;
    EXPECT_TRUE(ref::close(y, y2));
    sum(y2 * y2).backward();
    const auto composed = grads(leaves);
    for (size_t i = 0; i < leaves.size(); ++i) EXPECT_TRUE(ref::close(fused[i], composed[i])) << i;
  }
}

// ---- layouts, modes, names, init, errors -------------------------------------------------------

TEST_F(RNNTest, UnbatchedAndBatchFirstLayouts) {
  nn::LSTM lstm(nn::LSTMOptions(3, 4).num_layers(2));
  const Tensor x = randn({5, 3});
  const auto u = lstm.forward(x);
  EXPECT_EQ(u.output.shape(), (Shape{5, 4}));
  EXPECT_EQ(u.h_n.shape(), (Shape{2, 4}));
  EXPECT_EQ(u.c_n.shape(), (Shape{2, 4}));
  const auto b = lstm.forward(unsqueeze(x, 1));
  EXPECT_TRUE(ref::close(u.output, squeeze(b.output, 1)));
  EXPECT_TRUE(ref::close(u.c_n, squeeze(b.c_n, 1)));

  nn::GRU seq_first(nn::GRUOptions(3, 4));
  nn::GRU batch_first(nn::GRUOptions(3, 4).batch_first(true));
  {
    NoGradGuard no_grad;
    for (size_t i = 0; i < seq_first.parameters().size(); ++i)
      batch_first.parameters()[i].copy_(seq_first.parameters()[i]);
  }
  const Tensor xs = randn({6, 2, 3});
  const auto a = seq_first.forward(xs);
  const auto c = batch_first.forward(transpose(xs, 0, 1));
  EXPECT_EQ(c.output.shape(), (Shape{2, 6, 4}));
  EXPECT_TRUE(ref::close(transpose(c.output, 0, 1), a.output));
  EXPECT_TRUE(ref::close(c.h_n, a.h_n));
}

TEST_F(RNNTest, DropoutBetweenLayersOnlyInTraining) {
  nn::RNN rnn(nn::RNNOptions(3, 8).num_layers(2).dropout(0.5f));
  const Tensor x = randn({4, 2, 3});
  rnn.eval();
  const Tensor a = rnn.forward(x).output, b = rnn.forward(x).output;
  EXPECT_TRUE(ref::close(a, b, 0, 0));
  rnn.train();
  EXPECT_FALSE(ref::close(rnn.forward(x).output, a));
}

TEST_F(RNNTest, NoGradForwardMatches) {
  nn::GRU gru(nn::GRUOptions(3, 4).num_layers(2));
  const Tensor x = randn({4, 2, 3});
  const Tensor with = gru.forward(x).output;
  NoGradGuard guard;
  const Tensor without = gru.forward(x).output;
  EXPECT_FALSE(without.requires_grad());
  EXPECT_TRUE(ref::close(without, with, 0, 0));
}

TEST_F(RNNTest, ParameterNamesMatchPyTorch) {
  auto names = [](const nn::Module& m) {
    std::vector<std::string> out;
    for (const auto& [n, p] : m.named_parameters()) out.push_back(n + to_string(p.shape()));
    return out;
  };
  EXPECT_EQ(names(nn::RNNCell(5, 4)),
            (std::vector<std::string>{"i2h.weight[4, 5]", "i2h.bias[4]", "h2h.weight[4, 4]", "h2h.bias[4]"}));
  EXPECT_EQ(names(nn::LSTMCell(5, 4)),
            (std::vector<std::string>{"weight_ih[16, 5]", "weight_hh[16, 4]", "bias_ih[16]", "bias_hh[16]"}));
  EXPECT_EQ(names(nn::GRUCell(nn::GRUCellOptions(5, 4).bias(false))),
            (std::vector<std::string>{"weight_ih[12, 5]", "weight_hh[12, 4]"}));
  EXPECT_EQ(names(nn::GRU(nn::GRUOptions(5, 4).num_layers(2))),
            (std::vector<std::string>{"weight_ih_l0[12, 5]", "weight_hh_l0[12, 4]", "bias_ih_l0[12]",
                                      "bias_hh_l0[12]", "weight_ih_l1[12, 4]", "weight_hh_l1[12, 4]",
                                      "bias_ih_l1[12]", "bias_hh_l1[12]"}));
  EXPECT_EQ(names(nn::RNN(nn::RNNOptions(5, 4).bias(false))),
            (std::vector<std::string>{"weight_ih_l0[4, 5]", "weight_hh_l0[4, 4]"}));
  const std::string repr = nn::LSTM(nn::LSTMOptions(5, 4).num_layers(2)).repr();
  EXPECT_NE(repr.find("LSTM(input_size=5, hidden_size=4, num_layers=2, bias=true, batch_first=false)"),
            std::string::npos) << repr;
}

TEST_F(RNNTest, InitIsUniformWithinOneOverSqrtH) {
  nn::LSTM lstm(nn::LSTMOptions(50, 100).num_layers(2));
  double total = 0, n = 0;
  float lo = 1, hi = -1;
  for (const Tensor& p : lstm.parameters())
    for (float v : p.to_vector()) {
      total += v;
      ++n;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  EXPECT_GE(lo, -0.1f);
  EXPECT_LE(hi, 0.1f);
  EXPECT_LT(lo, -0.099f);  // spread over the whole interval
  EXPECT_GT(hi, 0.099f);
  EXPECT_NEAR(total / n, 0.0, 1e-3);
  // the RNNCell's Linear submodules are re-initialised like PyTorch's RNNCell too
  nn::RNNCell cell(8, 400);
  for (float v : cell.i2h->bias.to_vector()) EXPECT_LE(std::abs(v), 0.05f);
  EXPECT_GT(std::abs(cell.i2h->bias.to_vector()[0]) + std::abs(cell.i2h->bias.to_vector()[1]), 0.0f);
}

TEST(RNNErrors, MessagesNameTheModule) {
  struct Net : nn::Module {
    std::shared_ptr<nn::RNN> rnn;
    Net() : Module("Net") { rnn = register_module("rnn", std::make_shared<nn::RNN>(57, 128)); }
  } net;
  try {
    net.rnn->forward(zeros({12, 1, 50}));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(), "rnn (RNN 57→128): input last dim 50, expected 57, input shape [12, 1, 50]");
  }
  try {
    net.rnn->forward(zeros({12, 2, 57}), zeros({1, 3, 128}));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("rnn (RNN 57→128): h0 shape [1, 3, 128], expected [1, 2, 128]"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(net.rnn->forward(zeros({2, 12, 1, 57})), ShapeError);
  EXPECT_THROW(net.rnn->forward(zeros({0, 1, 57})), ShapeError);
  try {
    nn::LSTMCell(5, 4).forward(zeros({2, 5}), {zeros({2, 4}), zeros({3, 4})});
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(), "LSTMCell 5→4: c shape [3, 4], expected [2, 4]");
  }
  try {
    nn::RNNCell(5, 4).forward(zeros({2, 6}));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(), "RNNCell 5→4: input last dim 6, expected 5, input shape [2, 6]");
  }
  EXPECT_THROW(nn::LSTM(nn::LSTMOptions(5, 4)).forward(zeros({3, 2, 5}), {zeros({1, 2, 4}), zeros({2, 2, 4})}),
               ShapeError);
  EXPECT_THROW(nn::RNN(nn::RNNOptions(5, 4).nonlinearity("sigmoid")), ValueError);
  EXPECT_THROW(nn::RNNCell(nn::RNNCellOptions(5, 4).nonlinearity("gelu")), ValueError);
  EXPECT_THROW(nn::GRU(nn::GRUOptions(5, 4).num_layers(0)), ValueError);
  EXPECT_THROW(nn::LSTM(nn::LSTMOptions(5, 4).dropout(1.0f)), ValueError);
  EXPECT_THROW(nn::GRUCell(0, 4), ValueError);
}
