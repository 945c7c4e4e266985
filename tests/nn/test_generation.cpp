// Generation: the KV cache (cached forward == full forward position by position, causal and
// left-padded batches, multi-token chunks after a prefix, reset/truncate, bad uses), the logits
// processors against PyTorch (tests/reference/make_generation.py, Hugging Face's definitions),
// sampling reproducibility and statistics, generate with and without the cache, and the peak
// memory of a cached step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/no_grad.h"
#include "reference.h"
#include "tapegrad/tapegrad.h"

using namespace tg;
using namespace tg::nn;

namespace {

// A small decoder: token + learned position embeddings, pre-LN causal blocks, ln_f, head.
// Legend: B = batch, T = positions, C = d_model, V = vocabulary.
class TinyDecoder : public Module {
 public:
  TinyDecoder(int64_t V, int64_t max_pos, int64_t C, int64_t H, int64_t L, int64_t F,
              const std::string& activation = "gelu")
      : Module("TinyDecoder") {
    tok_emb = register_module("tok_emb", std::make_shared<Embedding>(V, C));
    pos_emb = register_module("pos_emb", std::make_shared<Embedding>(max_pos, C));
    auto list = register_module("blocks", std::make_shared<ModuleList>());
    for (int64_t l = 0; l < L; ++l)
      blocks.push_back(list->push_back(
          std::make_shared<TransformerBlock>(TransformerBlockOptions(C, H, F).activation(activation))));
    ln_f = register_module("ln_f", std::make_shared<LayerNorm>(C));
    head = register_module("head", std::make_shared<Linear>(C, V));
  }

  /// Full forward: ids (B, T), positions (B, T), key padding (B, T) or undefined -> (B, T, V)
  Tensor forward(const Indices& ids, const Indices& pos, const Tensor& key_padding = Tensor()) {
    Tensor x = tok_emb->forward(ids) + pos_emb->forward(pos);
    auto o = AttentionForwardOptions().causal(true);
    if (key_padding.defined()) o.key_padding_mask(AttnMask::boolean(key_padding));
    for (const auto& b : blocks) x = b->forward(x, o);
    return head->forward(ln_f->forward(x));
  }
  /// Cached forward: the new tokens (B, T) only -> (B, T, V)
  Tensor forward(const Indices& ids, KVCache& cache) {
    Tensor x = tok_emb->forward(ids) + pos_emb->forward(cache.positions(ids.shape[1]));
    for (size_t l = 0; l < blocks.size(); ++l) x = blocks[l]->forward(x, cache, static_cast<int64_t>(l));
    return head->forward(ln_f->forward(x));
  }
  /// The decoder generate() calls.
  Tensor step(const DecodeInput& in) {
    return in.cache ? forward(in.ids, *in.cache) : forward(in.ids, in.positions, in.key_padding_mask);
  }

  std::shared_ptr<Embedding> tok_emb, pos_emb;
  std::vector<std::shared_ptr<TransformerBlock>> blocks;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<Linear> head;
};

std::shared_ptr<TinyDecoder> make_model(uint64_t seed = 1, const std::string& activation = "gelu") {
  manual_seed(seed);
  auto m = std::make_shared<TinyDecoder>(13, 32, 16, 4, 2, 40, activation);
  m->eval();
  return m;
}

Indices ids_of(const std::vector<TokenIds>& rows) {
  std::vector<int64_t> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return Indices(flat, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
}

Indices arange_positions(int64_t B, int64_t T) {
  std::vector<int64_t> p;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) p.push_back(t);
  return Indices(p, {B, T});
}

/// Columns [t0, t0 + n) of rows, as ids (B, n).
Indices columns(const std::vector<TokenIds>& rows, int64_t t0, int64_t n) {
  std::vector<TokenIds> part;
  for (const auto& r : rows) part.emplace_back(r.begin() + t0, r.begin() + t0 + n);
  return ids_of(part);
}

const std::vector<TokenIds> kSeqs = {{1, 5, 2, 7, 7, 3, 9, 0, 4, 12, 6}, {3, 3, 8, 1, 0, 11, 2, 5, 5, 10, 1}};

// ---- the cache ------------------------------------------------------------------------------

// Prefix of 5, four single tokens, then a chunk of 2 (bottom-right causal after a prefix):
// every chunk's logits equal the full causal forward's at the same positions.
TEST(KVCache, CachedEqualsFullPositionByPosition) {
  auto model = make_model();
  NoGradGuard no_grad;
  const int64_t B = 2, T = 11;
  const Tensor full = model->forward(ids_of(kSeqs), arange_positions(B, T));  // (B, T, V)
  KVCache cache(2, B, 16);
  int64_t t0 = 0;
  for (const int64_t n : {5, 1, 1, 1, 1, 2}) {
    const Tensor part = model->forward(columns(kSeqs, t0, n), cache);
    EXPECT_TRUE(ref::close(part, narrow(full, 1, t0, n), 2e-5, 2e-5)) << "positions " << t0 << ".." << t0 + n;
    t0 += n;
    EXPECT_EQ(cache.length(), t0);
  }
  EXPECT_EQ(cache.keys(1).shape(), (Shape{2, 11, 16}));
  EXPECT_EQ(cache.nbytes(), 2 * 2 * 2 * 16 * 16 * 4);  // layers · (k, v) · B · M · C · 4 bytes
}

// Left-padded prompts of lengths 5, 3 and 1: the batch equals the full padded forward (key
// padding mask, positions from each row's first real token), and each row's real positions
// equal that row run alone, unpadded: padding changes nothing.
TEST(KVCache, LeftPaddedBatchMatchesEachRowAlone) {
  auto model = make_model(2);
  NoGradGuard no_grad;
  const std::vector<TokenIds> prompts = {{4, 1, 7, 2, 9}, {3, 8, 5}, {6}};
  const TokenIds extra = {2, 11, 0};  // one more token per row, fed one position at a time
  const int64_t B = 3, P = 5;
  std::vector<TokenIds> padded;
  std::vector<int64_t> pad;
  for (const auto& p : prompts) {
    pad.push_back(P - static_cast<int64_t>(p.size()));
    TokenIds row(static_cast<size_t>(pad.back()), 0);
    row.insert(row.end(), p.begin(), p.end());
    padded.push_back(row);
  }
  KVCache cache(2, B, 8);
  cache.set_left_padding(pad);
  const Indices pos = cache.positions(P);
  EXPECT_EQ(pos.values, (std::vector<int64_t>{0, 1, 2, 3, 4, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0}));
  const Tensor first = model->forward(ids_of(padded), cache);  // (B, P, V)
  const Tensor kpm = cache.key_padding_mask();
  EXPECT_EQ(kpm.to_vector(), (std::vector<float>{0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1, 0}));
  const Tensor full = model->forward(ids_of(padded), pos, kpm);
  EXPECT_TRUE(ref::close(first, full, 2e-5, 2e-5));
  const Tensor second = model->forward(ids_of({{extra[0]}, {extra[1]}, {extra[2]}}), cache);  // (B, 1, V)
  for (int64_t b = 0; b < B; ++b) {
    SCOPED_TRACE("row " + std::to_string(b));
    TokenIds alone = prompts[static_cast<size_t>(b)];
    alone.push_back(extra[static_cast<size_t>(b)]);
    const int64_t n = static_cast<int64_t>(alone.size());
    const Tensor ref_row = model->forward(ids_of({alone}), arange_positions(1, n));  // (1, n, V)
    const int64_t real = n - 1;
    EXPECT_TRUE(ref::close(narrow(narrow(first, 0, b, 1), 1, pad[static_cast<size_t>(b)], real),
                           narrow(ref_row, 1, 0, real), 2e-5, 2e-5));
    EXPECT_TRUE(ref::close(narrow(second, 0, b, 1), narrow(ref_row, 1, real, 1), 2e-5, 2e-5));
  }
}

TEST(KVCache, TruncateAndResetReplayTheSameSteps) {
  auto model = make_model(3);
  NoGradGuard no_grad;
  KVCache cache(2, 2, 16);
  model->forward(columns(kSeqs, 0, 6), cache);
  const Tensor a = model->forward(columns(kSeqs, 6, 2), cache);
  cache.truncate(6);
  EXPECT_EQ(cache.length(), 6);
  const Tensor b = model->forward(columns(kSeqs, 6, 2), cache);
  EXPECT_EQ(a.to_vector(), b.to_vector());
  cache.reset();
  EXPECT_EQ(cache.length(), 0);
  model->forward(columns(kSeqs, 0, 6), cache);
  EXPECT_EQ(model->forward(columns(kSeqs, 6, 2), cache).to_vector(), a.to_vector());
  EXPECT_THROW(cache.truncate(9), ValueError);
}

TEST(KVCache, CachedForwardRecordsNothing) {
  auto model = make_model(4);
  KVCache cache(2, 2, 16);
  const Tensor y = model->blocks[0]->forward(model->tok_emb->forward(columns(kSeqs, 0, 3)), cache, 0);
  EXPECT_FALSE(y.requires_grad());  // grad mode on outside, yet nothing recorded
}

TEST(KVCache, BadUsesGiveClearErrors) {
  auto model = make_model(5);
  NoGradGuard no_grad;
  {  // longer than its capacity
    KVCache cache(2, 2, 6);
    model->forward(columns(kSeqs, 0, 5), cache);
    try {
      model->forward(columns(kSeqs, 5, 2), cache);
      FAIL() << "no error";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("2 new positions after the 5 cached exceed the KVCache's max_length 6"),
                std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("blocks.0.attn"), std::string::npos) << e.what();
    }
  }
  {  // mismatched batch
    KVCache cache(2, 3, 8);
    try {
      model->blocks[0]->forward(zeros({2, 1, 16}), cache, 0);
      FAIL() << "no error";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("input batch 2 does not match the KVCache's batch_size 3"),
                std::string::npos) << e.what();
    }
  }
  {  // a cache from another model
    KVCache cache(2, 2, 8);
    model->forward(columns(kSeqs, 0, 2), cache);
    auto other = make_model(6);
    try {
      other->forward(columns(kSeqs, 2, 1), cache);
      FAIL() << "no error";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("layer 0 holds the keys of blocks.0.attn"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
    }
    cache.reset();  // then it may serve the other model
    EXPECT_NO_THROW(other->forward(columns(kSeqs, 0, 2), cache));
  }
  {  // fewer layers than the model
    KVCache cache(1, 2, 8);
    try {
      model->forward(columns(kSeqs, 0, 2), cache);
      FAIL() << "no error";
    } catch (const IndexError& e) {
      EXPECT_NE(std::string(e.what()).find("layer 1 is out of range for a cache of 1 layers"), std::string::npos)
          << e.what();
    }
  }
  {  // more layers than the model: the next read of its length says so
    KVCache cache(3, 2, 8);
    model->forward(columns(kSeqs, 0, 2), cache);
    try {
      cache.positions(1);
      FAIL() << "no error";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("layer 2 holds 0 positions but layer 0 holds 2"), std::string::npos)
          << e.what();
    }
  }
  {  // another embed_dim for the same layer index
    KVCache cache(2, 2, 8);
    model->blocks[0]->attn->forward(model->tok_emb->forward(columns(kSeqs, 0, 1)), cache, 0);
    cache.reset();
    MultiheadAttention wide(8, 2);
    EXPECT_THROW(wide.forward(zeros({2, 1, 8}), cache, 0), ShapeError);
  }
  KVCache cache(2, 2, 8);
  EXPECT_THROW(cache.set_left_padding({1}), ShapeError);
  EXPECT_THROW(cache.set_left_padding({1, -1}), ValueError);
  model->forward(columns(kSeqs, 0, 2), cache);
  EXPECT_THROW(cache.set_left_padding({1, 0}), ValueError);  // only on an empty cache
  EXPECT_THROW(cache.keys(2), IndexError);
  EXPECT_THROW(KVCache(0, 1, 1), ValueError);
  EXPECT_THROW(model->blocks[0]->forward(zeros({2, 1, 5}), cache, 0), ShapeError);
}

// ---- lean inference ---------------------------------------------------------------------------

// The no-grad path (in-place activation and residuals) computes the same values as the taped one.
TEST(LeanInference, NoGradBlockEqualsTapedBlock) {
  for (const std::string act : {"gelu", "relu"}) {
    auto model = make_model(7, act);
    const Tensor x = randn({2, 5, 16});
    const auto o = AttentionForwardOptions().causal(true);
    const Tensor taped = model->blocks[0]->forward(x, o);
    Tensor lean;
    {
      NoGradGuard no_grad;
      lean = model->blocks[0]->forward(x, o);
    }
    EXPECT_EQ(lean.to_vector(), taped.to_vector()) << act;
  }
  const Tensor x = randn({3, 70}) * 3.0f;
  for (const bool approximate : {false, true}) {
    NoGradGuard no_grad;
    const Tensor y = x.clone();
    detail::gelu_no_grad_(y, approximate);
    EXPECT_TRUE(ref::close(y, gelu(x, approximate), 1e-6, 1e-6));
  }
  EXPECT_THROW(detail::gelu_no_grad_(x.clone(), false), AutogradError);
}

// A cached step's peak live bytes stay within the weights, the cache and twice the largest
// activation of one block (here the attention weights (B, H, 1, Tk) or the (B, 1, F) hidden
// layer), with and without left padding.
TEST(LeanInference, CachedStepPeakMemory) {
  for (const auto& [padded, prompt_length] : {std::pair<bool, int64_t>{false, 100}, {true, 100}, {false, 10}, {true, 10}}) {
    // a long prompt: the attention weights are the largest activation; a short one: the hidden layer
    SCOPED_TRACE((padded ? "padded, prompt " : "unpadded, prompt ") + std::to_string(prompt_length));
    manual_seed(8);
    const int64_t V = 64, C = 64, H = 4, L = 2, F = 256, B = 4, M = 128;
    TinyDecoder model(V, M, C, H, L, F);
    model.eval();
    NoGradGuard no_grad;
    KVCache cache(L, B, M);
    if (padded) cache.set_left_padding({0, 3, 7, 1});  // (B, 1, 1, Tk) mask each step
    std::vector<TokenIds> prompt(static_cast<size_t>(B), TokenIds(static_cast<size_t>(prompt_length), 3));
    model.forward(ids_of(prompt), cache);
    int64_t weights = 0;
    for (const auto& p : model.parameters()) weights += p.numel() * 4;
    const std::vector<TokenIds> next(static_cast<size_t>(B), TokenIds{5});
    for (int step = 0; step < 3; ++step) {
      const Indices ids = ids_of(next);
      reset_peak_memory_stats();
      const int64_t before = memory_stats().live_bytes;
      model.forward(ids, cache);
      const int64_t Tk = cache.length();
      const int64_t largest = std::max<int64_t>(B * F, B * H * Tk) * 4;
      const int64_t peak = memory_stats().peak_bytes;
      EXPECT_LE(before, weights + cache.nbytes() + 2 * largest);  // nothing else stays alive
      EXPECT_LE(peak, weights + cache.nbytes() + 2 * largest)
          << "peak " << peak << ", weights " << weights << ", cache " << cache.nbytes() << ", largest " << largest;
      EXPECT_EQ(memory_stats().live_bytes, weights + cache.nbytes());  // no op kept anything
    }
  }
}

// ---- logits processors against PyTorch (Hugging Face's warpers) -------------------------------

const std::string kDir = "generation/";

Tensor fixture(const std::string& name) { return ref::load(kDir + name + ".npy"); }

/// ref::close, with -inf (a filtered logit) equal only to -inf.
::testing::AssertionResult same_filter(const Tensor& actual, const Tensor& expected) {
  const auto a = actual.to_vector(), e = expected.to_vector();
  if (actual.shape() != expected.shape()) return ::testing::AssertionFailure() << "shapes differ";
  for (size_t i = 0; i < a.size(); ++i)
    if (std::isinf(a[i]) || std::isinf(e[i]) ? a[i] != e[i] : std::abs(a[i] - e[i]) > 1e-5 + 1e-5 * std::abs(e[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs expected " << e[i];
  return ::testing::AssertionSuccess();
}

std::vector<TokenIds> seen_fixture() {
  const Indices s = ref::load_indices(kDir + "seen.npy");
  std::vector<TokenIds> rows;
  for (int64_t b = 0; b < s.shape[0]; ++b)
    rows.emplace_back(s.values.begin() + b * s.shape[1], s.values.begin() + (b + 1) * s.shape[1]);
  return rows;
}

TEST(LogitsProcessors, TopKMatchesReference) {
  const Tensor logits = fixture("logits");
  for (const int64_t k : {1, 3, 5, 20}) EXPECT_TRUE(same_filter(top_k_filter(logits, k), fixture("top_k." + std::to_string(k)))) << k;
  EXPECT_THROW(top_k_filter(logits, 0), ValueError);
}

TEST(LogitsProcessors, TopPMatchesReference) {
  const Tensor logits = fixture("logits");
  EXPECT_TRUE(same_filter(top_p_filter(logits, 0.3f), fixture("top_p.0.3")));
  EXPECT_TRUE(same_filter(top_p_filter(logits, 0.8f), fixture("top_p.0.8")));
  EXPECT_TRUE(same_filter(top_p_filter(logits, 0.95f), fixture("top_p.0.95")));
  EXPECT_TRUE(same_filter(top_p_filter(logits, 0.1f, 3), fixture("top_p.0.1.keep3")));
  EXPECT_EQ(top_p_filter(logits, 1.0f).to_vector(), logits.to_vector());
  EXPECT_THROW(top_p_filter(logits, 0.0f), ValueError);
  EXPECT_THROW(top_p_filter(logits, 1.5f), ValueError);
}

TEST(LogitsProcessors, RepetitionPenaltyMatchesReference) {
  const Tensor logits = fixture("logits");
  const auto seen = seen_fixture();
  EXPECT_TRUE(same_filter(repetition_penalty(logits, seen, 1.3f), fixture("penalty.1.3")));
  EXPECT_TRUE(same_filter(repetition_penalty(logits, seen, 0.7f), fixture("penalty.0.7")));
  EXPECT_THROW(repetition_penalty(logits, {{0}, {1}}, 1.3f), ShapeError);
  EXPECT_THROW(repetition_penalty(logits, {{0}, {1}, {2}, {12}}, 1.3f), IndexError);
  EXPECT_THROW(repetition_penalty(logits, seen, 0.0f), ValueError);
}

TEST(LogitsProcessors, FullChainDistributionMatchesReference) {
  const Tensor logits = fixture("logits");
  const Tensor processed = top_p_filter(top_k_filter(repetition_penalty(logits, seen_fixture(), 1.2f) / 0.7f, 6), 0.9f);
  EXPECT_TRUE(ref::close(softmax(processed, -1), fixture("chain")));
}

// ---- choosing tokens ----------------------------------------------------------------------------

TEST(Sampling, GreedyIsArgmaxAfterThePenalty) {
  const Tensor logits = tensor({{0.1f, 2.0f, 1.9f, -1.0f}, {3.0f, 3.0f, 0.0f, 0.0f}});
  Generator gen(1);
  EXPECT_EQ(next_tokens(logits, {}, SamplingOptions(), gen), (TokenIds{1, 0}));  // first of ties
  // 2.0 / 1.1 < 1.9: the seen token 1 loses to 2
  EXPECT_EQ(next_tokens(logits, {{1}, {}}, SamplingOptions().repetition_penalty(1.1f), gen), (TokenIds{2, 0}));
}

TEST(Sampling, ReproducibleForASeedAndFollowsTheDistribution) {
  const Tensor logits = tensor({{1.0f, 0.0f, -1.0f, 0.5f}});
  const auto o = SamplingOptions().do_sample(true).temperature(0.8f);
  auto draw = [&](uint64_t seed) {
    Generator gen(seed);
    TokenIds t;
    for (int i = 0; i < 64; ++i) t.push_back(next_tokens(logits, {}, o, gen)[0]);
    return t;
  };
  EXPECT_EQ(draw(3), draw(3));
  EXPECT_NE(draw(3), draw(4));
  Generator gen(5);
  const int n = 40000;
  std::vector<int> count(4, 0);
  for (int i = 0; i < n; ++i) ++count[static_cast<size_t>(next_tokens(logits, {}, o, gen)[0])];
  const auto p = softmax(logits / 0.8f, -1).to_vector();
  for (size_t j = 0; j < 4; ++j) EXPECT_NEAR(count[j] / double(n), p[j], 0.01) << j;
  // top-k 1 is greedy; top-p 0.6 keeps the nucleus {0, 3} (probabilities 0.47 and 0.29 of
  // softmax(1, 0, -1, 0.5); the other two add up to 0.24 <= 1 - 0.6)
  Generator g2(6);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(next_tokens(logits, {}, SamplingOptions().do_sample(true).top_k(1), g2)[0], 0);
    const int64_t t = next_tokens(logits, {}, SamplingOptions().do_sample(true).top_p(0.6f), g2)[0];
    EXPECT_TRUE(t == 0 || t == 3) << t;
  }
  EXPECT_THROW(next_tokens(logits, {}, SamplingOptions().temperature(0.0f), gen), ValueError);
  EXPECT_THROW(next_tokens(logits, {}, SamplingOptions().top_k(-1), gen), ValueError);
}

// ---- generate -----------------------------------------------------------------------------------

TEST(Generate, GreedySameTokensWithAndWithoutCache) {
  auto model = make_model(9);
  const std::vector<TokenIds> prompts = {{4, 1, 7, 2, 9}, {3, 8, 5}, {6}};
  KVCache cache(2, 3, 32);
  const DecodeFn step = [&](const DecodeInput& in) { return model->step(in); };
  const auto o = GenerateOptions().max_new_tokens(20);
  const auto cached = generate(step, prompts, o, &cache);
  const auto recomputed = generate(step, prompts, GenerateOptions(o).use_cache(false));
  EXPECT_EQ(cached, recomputed);
  for (const auto& row : cached) EXPECT_EQ(row.size(), 20u);
  // each row alone (no padding) gives the same tokens
  for (size_t b = 0; b < prompts.size(); ++b) {
    KVCache one(2, 1, 32);
    EXPECT_EQ(generate(step, {prompts[b]}, o, &one)[0], cached[b]) << b;
  }
  // the logits agree too: replay the last step from the cache and compare it with the full
  // padded forward over the same tokens (and its argmax with the last token)
  const int64_t n = 5 + 19;  // the longest prompt and the 19 tokens fed back
  std::vector<TokenIds> padded;
  std::vector<int64_t> pad;
  TokenIds last;
  for (size_t b = 0; b < prompts.size(); ++b) {
    TokenIds s = prompts[b];
    s.insert(s.end(), cached[b].begin(), cached[b].end() - 1);
    pad.push_back(n - static_cast<int64_t>(s.size()));
    TokenIds row(static_cast<size_t>(pad.back()), 0);
    row.insert(row.end(), s.begin(), s.end());
    padded.push_back(row);
    last.push_back(s.back());
  }
  NoGradGuard no_grad;
  ASSERT_EQ(cache.length(), n);
  cache.truncate(n - 1);
  const Tensor step_logits = model->forward(ids_of({{last[0]}, {last[1]}, {last[2]}}), cache);  // (3, 1, V)
  std::vector<int64_t> pos;
  std::vector<float> kp;
  for (size_t b = 0; b < 3; ++b)
    for (int64_t t = 0; t < n; ++t) {
      pos.push_back(std::max<int64_t>(0, t - pad[b]));
      kp.push_back(t < pad[b] ? 1.0f : 0.0f);
    }
  const Tensor full = narrow(model->forward(ids_of(padded), Indices(pos, {3, n}), tensor(kp, {3, n})), 1, n - 1, 1);
  EXPECT_TRUE(ref::close(step_logits, full, 2e-5, 2e-5));
  Generator unused(0);
  const TokenIds argmax = next_tokens(select(full, 1, 0), {}, SamplingOptions(), unused);
  for (size_t b = 0; b < 3; ++b) EXPECT_EQ(argmax[b], cached[b].back()) << b;
}

TEST(Generate, SamplingReproducibleAndStopsAtEos) {
  auto model = make_model(10);
  const DecodeFn step = [&](const DecodeInput& in) { return model->step(in); };
  const std::vector<TokenIds> prompts = {{1, 2}, {3}};
  KVCache cache(2, 2, 40);
  const auto o = GenerateOptions().max_new_tokens(30).sampling(
      SamplingOptions().do_sample(true).temperature(0.9f).top_k(8).top_p(0.95f).repetition_penalty(1.2f));
  Generator a(11), b(11), c(12);
  const auto first = generate(step, prompts, o, &cache, &a);
  EXPECT_EQ(generate(step, prompts, o, &cache, &b), first);  // the cache is reset by generate
  EXPECT_NE(generate(step, prompts, o, &cache, &c), first);
  // eos: rows stop after it; the output ends with it
  const int64_t eos = first[0][3];
  Generator d(11);
  const auto stopped = generate(step, prompts, GenerateOptions(o).eos_token_id(eos), &cache, &d);
  for (size_t r = 0; r < 2; ++r) {
    TokenIds expected = first[r];
    const auto at = std::find(expected.begin(), expected.end(), eos);
    if (at != expected.end()) expected.erase(at + 1, expected.end());
    EXPECT_EQ(stopped[r], expected) << r;
  }
  EXPECT_EQ(stopped[0].back(), eos);
}

TEST(Generate, BadArguments) {
  auto model = make_model(13);
  const DecodeFn step = [&](const DecodeInput& in) { return model->step(in); };
  KVCache cache(2, 2, 10);
  EXPECT_THROW(generate(step, {{1, 2}}, GenerateOptions(), &cache), ShapeError);  // batch 1 vs 2
  try {
    generate(step, {{1, 2, 3}, {4}}, GenerateOptions().max_new_tokens(9), &cache);
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("need 11 cached positions, the KVCache has max_length 10"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(generate(step, {{1}, {}}, GenerateOptions(), &cache), ValueError);
  EXPECT_THROW(generate(step, {{1}, {2}}, GenerateOptions()), ValueError);  // use_cache without a cache
  const DecodeFn wrong = [](const DecodeInput&) { return zeros({5, 3}); };
  EXPECT_THROW(generate(wrong, {{1}, {2}}, GenerateOptions().max_new_tokens(2), &cache), ShapeError);
}

}  // namespace
