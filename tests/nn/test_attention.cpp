// MultiheadAttention, FeedForward and TransformerBlock: PyTorch 1.13 reference values (forward,
// attention weights, input gradients and every parameter's gradient; written by
// tests/reference/make_attention.py), gradient checks through the modules, the all-masked-row
// rule, dropout modes and bad options.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/packed_projection.h"  // impl::PackedInProjection::packs_of
#include "reference.h"
#include "tapegrad/tapegrad.h"

using namespace tg;
using namespace tg::nn;

namespace {

const std::string kDir = "attention/";

Tensor load(const std::string& name) { return ref::load(kDir + name + ".npy"); }

// Copies every parameter from <case>.param.<name>.npy; the file count must match too.
void load_params(Module& m, const std::string& c) {
  const auto params = m.named_parameters();
  const auto n = ref::load_indices(kDir + c + ".nparams.npy");
  ASSERT_EQ(n.values.at(0), static_cast<int64_t>(params.size())) << c;
  NoGradGuard no_grad;  // parameters are set as PyTorch users do, under torch.no_grad()
  for (const auto& [name, t] : params) t.copy_(load(c + ".param." + name));
}

void expect_param_grads(Module& m, const std::string& c) {
  for (const auto& [name, t] : m.named_parameters())
    EXPECT_TRUE(ref::close(t.grad(), load(c + ".grad." + name))) << c << ": " << name;
}

Tensor input(const Shape& s) { return (rand(s) * 2.0f - 1.0f).detach().requires_grad_(); }

std::vector<Tensor> with_params(const std::vector<Tensor>& xs, Module& m) {
  std::vector<Tensor> all = xs;
  for (const auto& p : m.parameters()) all.push_back(p);
  return all;
}

struct MhaCase {
  std::string name;
  bool bias;
  bool self_attention;
  bool causal;
  enum { kNone, kBool, kAdditive } attn_mask;
  bool key_padding;
};

void run_mha_case(const MhaCase& c, bool mask_as_causal_flag) {
  SCOPED_TRACE(c.name);
  auto mha = std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(8, 2).bias(c.bias));
  load_params(*mha, c.name);
  Tensor q, k, v;
  if (c.self_attention) {
    q = k = v = ref::load(kDir + c.name + ".x.npy", true);
  } else {
    q = ref::load(kDir + c.name + ".query.npy", true);
    k = ref::load(kDir + c.name + ".key.npy", true);
    v = ref::load(kDir + c.name + ".value.npy", true);
  }
  AttentionForwardOptions o;
  o.need_weights(true);
  if (c.causal && mask_as_causal_flag) o.causal(true);
  if (c.causal && !mask_as_causal_flag) o.attn_mask(AttnMask::boolean(load(c.name + ".attn_mask")));
  if (c.attn_mask == MhaCase::kBool) o.attn_mask(AttnMask::boolean(load(c.name + ".attn_mask")));
  if (c.attn_mask == MhaCase::kAdditive) o.attn_mask(AttnMask::additive(load(c.name + ".attn_mask")));
  if (c.key_padding) o.key_padding_mask(AttnMask::boolean(load(c.name + ".key_padding_mask")));
  auto [y, w] = mha->forward(q, k, v, o);
  EXPECT_TRUE(ref::close(y, load(c.name + ".y")));
  EXPECT_TRUE(ref::close(w, load(c.name + ".weights")));
  sum(y * load(c.name + ".g")).backward();
  if (c.self_attention) {
    EXPECT_TRUE(ref::close(q.grad(), load(c.name + ".dx")));
  } else {
    EXPECT_TRUE(ref::close(q.grad(), load(c.name + ".dquery")));
    EXPECT_TRUE(ref::close(k.grad(), load(c.name + ".dkey")));
    EXPECT_TRUE(ref::close(v.grad(), load(c.name + ".dvalue")));
  }
  expect_param_grads(*mha, c.name);
}

class NnAttention : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(5); }
};

}  // namespace

TEST_F(NnAttention, MhaMatchesPyTorch) {
  const std::vector<MhaCase> cases = {
      {"mha_causal_bias", true, true, true, MhaCase::kNone, false},
      {"mha_causal_nobias", false, true, true, MhaCase::kNone, false},
      {"mha_padding_bias", true, true, false, MhaCase::kNone, true},
      {"mha_padding_nobias", false, true, false, MhaCase::kNone, true},
      {"mha_cross_bias", true, false, false, MhaCase::kNone, false},
      {"mha_cross_nobias", false, false, false, MhaCase::kNone, false},
      {"mha_cross_additive", true, false, false, MhaCase::kAdditive, true},
      {"mha_mask3d", true, true, false, MhaCase::kBool, false},
  };
  for (const auto& c : cases) run_mha_case(c, /*mask_as_causal_flag=*/true);
  // The causal flag and PyTorch's bool triu mask passed as attn_mask agree.
  run_mha_case(cases[0], false);
  run_mha_case(cases[1], false);
}

TEST_F(NnAttention, TransformerBlockMatchesPyTorch) {
  for (const std::string act : {"gelu", "relu"}) {
    const std::string c = act == "gelu" ? "block_gelu_causal" : "block_relu_padding";
    SCOPED_TRACE(c);
    auto block = std::make_shared<TransformerBlock>(TransformerBlockOptions(8, 2, 16).activation(act));
    load_params(*block, c);
    Tensor x = ref::load(kDir + c + ".x.npy", true);
    AttentionForwardOptions o;
    if (act == "gelu") o.causal(true);
    else o.key_padding_mask(AttnMask::boolean(load(c + ".key_padding_mask")));
    Tensor y = block->forward(x, o);
    EXPECT_TRUE(ref::close(y, load(c + ".y")));
    sum(y * load(c + ".g")).backward();
    EXPECT_TRUE(ref::close(x.grad(), load(c + ".dx")));
    expect_param_grads(*block, c);
  }
}

TEST_F(NnAttention, ParameterNames) {
  auto block = std::make_shared<TransformerBlock>(TransformerBlockOptions(8, 2, 16));
  std::vector<std::string> names;
  for (const auto& [n, t] : block->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "ln1.weight", "ln1.bias", "attn.q_proj.weight", "attn.q_proj.bias",
                       "attn.k_proj.weight", "attn.k_proj.bias", "attn.v_proj.weight",
                       "attn.v_proj.bias", "attn.out_proj.weight", "attn.out_proj.bias",
                       "ln2.weight", "ln2.bias", "ffn.fc1.weight", "ffn.fc1.bias",
                       "ffn.fc2.weight", "ffn.fc2.bias"}));
  auto mha = std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(8, 4).bias(false));
  EXPECT_EQ(mha->named_parameters().size(), 4u);
  EXPECT_EQ(mha->head_dim, 2);
  // q/k/v drawn as one Xavier-uniform (3C, C) matrix, as PyTorch's in_proj_weight.
  const float bound = std::sqrt(6.0f / (8 + 24));
  float largest = 0;
  for (const auto& p : {mha->q_proj, mha->k_proj, mha->v_proj})
    for (float w : p->weight.to_vector()) largest = std::max(largest, std::abs(w));
  EXPECT_LE(largest, bound);
  EXPECT_GT(largest, 0.8f * bound);
}

TEST_F(NnAttention, Gradcheck) {
  auto mha = std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(6, 3));
  for (const auto& p : mha->parameters()) init::uniform_(p, -0.5f, 0.5f);
  Tensor kpm = zeros({2, 4});
  kpm.data()(1, 3) = 1.0f;
  // Cross-attention with a padding mask; causal self-attention.
  auto r = gradcheck(
      [&](const std::vector<Tensor>& x) {
        return mha->forward(x[0], x[1], x[2], AttentionForwardOptions().key_padding_mask(AttnMask::boolean(kpm))).output;
      },
      with_params({input({2, 3, 6}), input({2, 4, 6}), input({2, 4, 6})}, *mha));
  EXPECT_TRUE(r.ok) << r.message;
  r = gradcheck(
      [&](const std::vector<Tensor>& x) {
        return mha->forward(x[0], x[0], x[0], AttentionForwardOptions().causal(true)).output;
      },
      with_params({input({2, 4, 6})}, *mha));
  EXPECT_TRUE(r.ok) << r.message;

  auto block = std::make_shared<TransformerBlock>(TransformerBlockOptions(6, 2, 8));
  for (const auto& p : block->parameters()) init::uniform_(p, -0.5f, 0.5f);
  r = gradcheck(
      [&](const std::vector<Tensor>& x) { return block->forward(x[0], AttentionForwardOptions().causal(true)); },
      with_params({input({2, 3, 6})}, *block));
  EXPECT_TRUE(r.ok) << r.message;

  auto ffn = std::make_shared<FeedForward>(FeedForwardOptions(4, 6).activation("relu"));
  r = gradcheck([&](const std::vector<Tensor>& x) { return ffn->forward(x[0]); },
                with_params({input({3, 4})}, *ffn));
  EXPECT_TRUE(r.ok) << r.message;
}

TEST_F(NnAttention, AllMaskedRowGivesBiasNotNaN) {
  auto mha = std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(8, 2));
  for (const auto& p : mha->parameters()) init::uniform_(p, -0.5f, 0.5f);
  Tensor x = input({2, 3, 8});
  Tensor kpm = zeros({2, 3});
  for (int64_t j = 0; j < 3; ++j) kpm.data()(1, j) = 1.0f;  // batch 1: every key is padding
  auto [y, w] = mha->forward(x, x, x, AttentionForwardOptions().key_padding_mask(AttnMask::boolean(kpm)).need_weights(true));
  const auto bias = mha->out_proj->bias.to_vector();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t c = 0; c < 8; ++c) EXPECT_FLOAT_EQ(y.data()(1, i, c), bias[static_cast<size_t>(c)]);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(w.data()(1, h, i, j), 0.0f);
  // Batch 0 is unaffected: it equals a run on batch 0 alone.
  Tensor x0 = narrow(x, 0, 0, 1).detach();
  const auto y0 = mha->forward(x0, x0, x0).output.to_vector();
  for (size_t i = 0; i < y0.size(); ++i) EXPECT_NEAR(y.to_vector()[i], y0[i], 1e-6);
  sum(y * y).backward();
  for (float g : x.grad().to_vector()) EXPECT_FALSE(std::isnan(g));
  for (const auto& p : mha->parameters())
    for (float g : p.grad().to_vector()) EXPECT_FALSE(std::isnan(g));
}

TEST_F(NnAttention, NeedWeightsAndDropoutModes) {
  auto mha = std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(8, 2).dropout(0.5f));
  Tensor x = input({2, 4, 8});
  EXPECT_FALSE(mha->forward(x, x, x).weights.defined());
  mha->eval();
  const auto a = mha->forward(x, x, x).output.to_vector();
  const auto b = mha->forward(x, x, x).output.to_vector();
  EXPECT_EQ(a, b);
  mha->train();
  auto [yt, wt] = mha->forward(x, x, x, AttentionForwardOptions().need_weights(true));
  EXPECT_NE(yt.to_vector(), a);
  int dropped = 0;
  for (float v : wt.to_vector()) dropped += v == 0.0f;
  EXPECT_GT(dropped, 0);

  auto block = std::make_shared<TransformerBlock>(TransformerBlockOptions(8, 2, 16).dropout(0.3f));
  block->eval();
  const auto e1 = block->forward(x).to_vector();
  EXPECT_EQ(block->forward(x).to_vector(), e1);
  block->train();
  EXPECT_NE(block->forward(x).to_vector(), e1);
}

TEST_F(NnAttention, BadOptionsAndInputs) {
  EXPECT_THROW(std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(10, 3)), ValueError);
  try {
    std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(10, 3));
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("MultiheadAttention"), std::string::npos) << msg;
    EXPECT_NE(msg.find("divisible"), std::string::npos) << msg;
  }
  EXPECT_THROW(std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(0, 1)), ValueError);
  EXPECT_THROW(std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(8, 2).dropout(1.5f)), ValueError);
  EXPECT_THROW(std::make_shared<FeedForward>(FeedForwardOptions(8, 16).activation("tanh")), ValueError);
  EXPECT_THROW(std::make_shared<FeedForward>(FeedForwardOptions(8, 0)), ValueError);
  EXPECT_THROW(std::make_shared<TransformerBlock>(TransformerBlockOptions(8, 3, 16)), ValueError);
  EXPECT_THROW(std::make_shared<TransformerBlock>(TransformerBlockOptions(8, 2, 16).dropout(-0.1f)), ValueError);

  // Errors in forward name the module's path.
  struct Net : Module {
    std::shared_ptr<ModuleList> blocks;
    Net() : Module("Net") {
      blocks = register_module("blocks", std::make_shared<ModuleList>());
      blocks->push_back(std::make_shared<TransformerBlock>(TransformerBlockOptions(8, 2, 16)));
    }
  } net;
  auto block = net.blocks->at<TransformerBlock>(0);
  auto expect_msg = [](const std::function<void()>& f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one containing: " << part;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_msg([&] { block->forward(zeros({2, 5, 6})); }, "blocks.0 (TransformerBlock");
  auto& attn = *block->attn;
  const Tensor x = zeros({2, 5, 8});
  expect_msg([&] { attn.forward(zeros({2, 5, 6}), x, x); }, "blocks.0.attn (MultiheadAttention 8, 2 heads)");
  expect_msg([&] { attn.forward(zeros({5, 8}), x, x); }, "blocks.0.attn");
  expect_msg([&] { attn.forward(x, zeros({3, 5, 8}), zeros({3, 5, 8})); }, "same batch size");
  expect_msg([&] { attn.forward(x, zeros({2, 4, 8}), x); }, "same length");
  expect_msg([&] { attn.forward(x, x, x, AttentionForwardOptions().attn_mask(AttnMask::boolean(zeros({5, 4})))); },
             "attn_mask shape [5, 4]");
  expect_msg([&] { attn.forward(x, x, x, AttentionForwardOptions().attn_mask(AttnMask::boolean(zeros({2, 5, 5})))); },
             "(B·H, Tq, Tk) = [4, 5, 5]");
  expect_msg([&] { attn.forward(x, x, x, AttentionForwardOptions().key_padding_mask(AttnMask::boolean(zeros({2, 4})))); },
             "key_padding_mask shape [2, 4], expected (B, Tk) = [2, 5]");
}

// ---- the packed q/k/v projection of self-attention -------------------------------------------

namespace {

int64_t packs(const MultiheadAttention& m) { return impl::PackedInProjection::packs_of(m); }

struct Grads {
  Tensor y, dx;
  std::vector<Tensor> params;  // each parameter's gradient (undefined where none)
};

/// One forward and backward of self-attention on x's values: packed (x passed three times) or
/// through three GEMMs (key and value other tensors with x's values, their gradients added).
Grads run_self_attention(MultiheadAttention& mha, const Tensor& values, bool packed,
                         const AttentionForwardOptions& o = AttentionForwardOptions()) {
  mha.zero_grad(true);
  const Tensor x = values.detach().clone().requires_grad_();
  const Tensor k = packed ? x : x * 1.0f, v = packed ? x : x * 1.0f;
  Grads r;
  r.y = mha.forward(x, k, v, o).output;
  sum(r.y * r.y).backward();
  r.dx = x.grad();
  for (const auto& p : mha.parameters()) r.params.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
  return r;
}

/// The packed path runs (it packs at most once) and equals the three GEMMs.
void expect_packed_equals_unpacked(MultiheadAttention& mha, const Tensor& x,
                                   const AttentionForwardOptions& o = AttentionForwardOptions()) {
  const int64_t before = packs(mha);
  const Grads a = run_self_attention(mha, x, true, o);
  EXPECT_LE(packs(mha), before + 1);
  const Grads b = run_self_attention(mha, x, false, o);
  EXPECT_TRUE(ref::close(a.y, b.y));
  EXPECT_TRUE(ref::close(a.dx, b.dx));
  const auto names = mha.named_parameters();
  for (size_t i = 0; i < a.params.size(); ++i) {
    SCOPED_TRACE(names.keys()[i]);
    ASSERT_EQ(a.params[i].defined(), b.params[i].defined());
    if (a.params[i].defined()) EXPECT_TRUE(ref::close(a.params[i], b.params[i]));
  }
}

}  // namespace

TEST_F(NnAttention, PackedProjectionEqualsThreeGemms) {
  for (const bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    auto mha = std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(8, 2).bias(bias));
    for (const auto& p : mha->parameters()) init::uniform_(p, -0.5f, 0.5f);
    const Tensor x = rand({2, 5, 8}) * 2.0f - 1.0f;
    const int64_t before = packs(*mha);
    expect_packed_equals_unpacked(*mha, x);
    EXPECT_EQ(packs(*mha), before + 1);  // the packed path ran
    expect_packed_equals_unpacked(*mha, x, AttentionForwardOptions().causal(true));
    Tensor kpm = zeros({2, 5});
    kpm.data()(0, 4) = 1.0f;
    expect_packed_equals_unpacked(*mha, x, AttentionForwardOptions().key_padding_mask(AttnMask::boolean(kpm)));
    // The fused causal kernel (keys >= its min_keys): packed operands there too.
    expect_packed_equals_unpacked(*mha, rand({1, 130, 8}), AttentionForwardOptions().causal(true));
    EXPECT_EQ(packs(*mha), before + 1);  // nothing changed since: packed once
  }
}

TEST_F(NnAttention, PackedProjectionFollowsTheWeights) {
  auto mha = std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(8, 2));
  for (const auto& p : mha->parameters()) init::uniform_(p, -0.5f, 0.5f);
  const Tensor x = rand({2, 4, 8});
  expect_packed_equals_unpacked(*mha, x);
  int64_t n = packs(*mha);

  {  // an optimizer step (a version bump of every weight)
    SCOPED_TRACE("after an optimizer step");
    run_self_attention(*mha, x, true);
    optim::SGD(mha->parameters(), 0.1).step();
    expect_packed_equals_unpacked(*mha, x);
    EXPECT_EQ(packs(*mha), n + 1);
    n = packs(*mha);
  }
  {  // load_state_dict from another module
    SCOPED_TRACE("after load_state_dict");
    auto other = std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(8, 2));
    for (const auto& p : other->parameters()) init::uniform_(p, -0.5f, 0.5f);
    std::vector<std::pair<std::string, Tensor>> state;
    for (const auto& [k, v] : other->state_dict()) state.emplace_back(k, v);
    load_state_dict(*mha, state);
    const Grads a = run_self_attention(*mha, x, true);
    const Grads b = run_self_attention(*other, x, true);
    EXPECT_TRUE(ref::close(a.y, b.y));
    EXPECT_EQ(packs(*mha), n + 1);
    n = packs(*mha);
  }
  {  // a new tensor assigned to a weight: its gradient goes to the new tensor
    SCOPED_TRACE("after assigning a new weight");
    mha->k_proj->weight = (rand({8, 8}) - 0.5f).detach().requires_grad_();
    expect_packed_equals_unpacked(*mha, x);
    EXPECT_EQ(packs(*mha), n + 1);
    n = packs(*mha);
  }
  {  // a raw pointer handed out before packing, written after: no version bump, still seen
    SCOPED_TRACE("after a raw write");
    float* w = mha->v_proj->weight.data_ptr();
    expect_packed_equals_unpacked(*mha, x);
    n = packs(*mha);
    w[3] += 0.25f;
    expect_packed_equals_unpacked(*mha, x);
    EXPECT_EQ(packs(*mha), n + 1);
  }
  {  // a frozen weight gets no gradient, packed or not
    SCOPED_TRACE("frozen q_proj.weight");
    mha->q_proj->weight.requires_grad_(false);
    expect_packed_equals_unpacked(*mha, x);
  }
}

TEST_F(NnAttention, PackedProjectionKeepsTheStateDict) {
  auto mha = std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(8, 2));
  const Tensor x = rand({1, 3, 8});
  mha->forward(x, x, x);
  std::vector<std::string> keys;
  for (const auto& [k, v] : mha->state_dict()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"q_proj.weight", "q_proj.bias", "k_proj.weight",
                                            "k_proj.bias", "v_proj.weight", "v_proj.bias",
                                            "out_proj.weight", "out_proj.bias"}));
}

TEST_F(NnAttention, CrossAttentionDoesNotPack) {
  auto mha = std::make_shared<MultiheadAttention>(MultiheadAttentionOptions(8, 2));
  const Tensor q = rand({1, 3, 8}), kv = rand({1, 4, 8});
  mha->forward(q, kv, kv);
  mha->forward(kv, kv, kv * 1.0f);  // self-attention, but not the same tensor three times
  EXPECT_EQ(packs(*mha), 0);
}
