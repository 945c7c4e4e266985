// The fused scaled_dot_product_attention against the unfused composition (matmul, masked_fill,
// softmax, matmul) it replaces: forward values and every gradient, finite-difference checks,
// the all-masked-row rule, the returned weights, dropout and bad input. Then the fused causal
// kernel (tiles, online softmax) against the reference kernel over block edges, views,
// Tq != Tk and masks, and the memory it saves.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/attention.h"  // detail::ReferenceAttentionScope, attention_tiles
#include "tapegrad/tapegrad.h"

using namespace tg;
using Inputs = std::vector<Tensor>;

namespace {
const float kInf = std::numeric_limits<float>::infinity();

Tensor input(const Shape& s) { return (rand(s) * 2.0f - 1.0f).detach().requires_grad_(); }

// 0/1 tensor with 1 where key j > query i: what is_causal masks.
Tensor causal_mask(int64_t tq, int64_t tk) {
  Tensor m = zeros({tq, tk});
  for (int64_t i = 0; i < tq; ++i)
    for (int64_t j = i + 1; j < tk; ++j) m.data()(i, j) = 1.0f;
  return m;
}

// The unfused reference: every step a separate op on the tape.
Tensor unfused(const Tensor& q, const Tensor& k, const Tensor& v, const AttnMask& mask = AttnMask(),
               bool causal = false) {
  Tensor s = matmul(q, transpose(k, -2, -1)) * (1.0f / std::sqrt(static_cast<float>(q.size(-1))));
  if (mask.defined())
    s = mask.is_boolean() ? masked_fill(s, mask.values, -kInf) : s + mask.values;
  if (causal) s = masked_fill(s, causal_mask(q.size(-2), k.size(-2)), -kInf);
  return matmul(softmax(s, -1), v);
}

// Random 0/1 mask of `shape` that leaves key 0 unmasked, so no row is entirely masked.
Tensor bool_mask(const Shape& shape) {
  Tensor m = rand(shape);
  const int64_t tk = shape.back();
  for (int64_t i = 0; i < m.numel(); ++i) m.data()[i] = (i % tk != 0 && m.data()[i] < 0.4f) ? 1.0f : 0.0f;
  return m;
}

// Forward and gradients (of a random projection) of fused vs unfused agree.
void expect_same(const Tensor& q, const Tensor& k, const Tensor& v, const AttnMask& mask,
                 bool causal) {
  std::vector<Tensor> leaves = {q, k, v};
  if (mask.defined() && mask.values.requires_grad()) leaves.push_back(mask.values);
  auto run = [&](bool fused) {
    for (auto& t : leaves) t.set_grad(Tensor());
    Tensor y = fused ? scaled_dot_product_attention(q, k, v, mask, causal) : unfused(q, k, v, mask, causal);
    manual_seed(7);
    Tensor r = rand(y.shape());
    sum(y * r).backward();
    std::vector<std::vector<float>> out = {y.to_vector()};
    for (auto& t : leaves) out.push_back(t.grad().to_vector());
    return out;
  };
  const auto a = run(true), b = run(false);
  ASSERT_EQ(a.size(), b.size());
  for (size_t t = 0; t < a.size(); ++t) {
    ASSERT_EQ(a[t].size(), b[t].size());
    for (size_t i = 0; i < a[t].size(); ++i)
      ASSERT_NEAR(a[t][i], b[t][i], 2e-6 + 2e-5 * std::abs(b[t][i]))
          << (t == 0 ? "output" : "gradient of leaf " + std::to_string(t - 1)) << " element " << i;
  }
}

void check(const std::function<Tensor(const Inputs&)>& fn, const Inputs& xs) {
  const auto r = gradcheck(fn, xs);
  EXPECT_TRUE(r.ok) << r.message;
}

class Attention : public ::testing::Test {
 protected:
  // The fused causal kernel for every length here (by default short ones run the reference).
  void SetUp() override {
    manual_seed(3);
    detail::AttentionTiles t = detail::attention_tiles();
    t.min_keys = 1;
    detail::set_attention_tiles(t);
  }
  void TearDown() override { detail::set_attention_tiles(detail::AttentionTiles()); }
};
}  // namespace

TEST_F(Attention, FusedMatchesUnfused) {
  // (B, H, T, D), no mask; causal; cross lengths with Dv != D; 3-D and 2-D inputs.
  expect_same(input({2, 3, 5, 4}), input({2, 3, 5, 4}), input({2, 3, 5, 4}), AttnMask(), false);
  expect_same(input({2, 3, 5, 4}), input({2, 3, 5, 4}), input({2, 3, 5, 4}), AttnMask(), true);
  expect_same(input({2, 2, 3, 4}), input({2, 2, 6, 4}), input({2, 2, 6, 5}), AttnMask(), false);
  expect_same(input({2, 4, 3}), input({2, 7, 3}), input({2, 7, 2}), AttnMask(), true);
  expect_same(input({4, 3}), input({6, 3}), input({6, 3}), AttnMask(), false);
}

TEST_F(Attention, FusedMatchesUnfusedWithMasks) {
  // Boolean (Tq, Tk), key-padding style (B, 1, 1, Tk) and full (B, H, Tq, Tk).
  expect_same(input({2, 3, 5, 4}), input({2, 3, 6, 4}), input({2, 3, 6, 4}),
              AttnMask::boolean(bool_mask({5, 6})), false);
  expect_same(input({2, 3, 5, 4}), input({2, 3, 5, 4}), input({2, 3, 5, 4}),
              AttnMask::boolean(bool_mask({2, 1, 1, 5})), true);
  expect_same(input({2, 3, 4, 4}), input({2, 3, 4, 4}), input({2, 3, 4, 4}),
              AttnMask::boolean(bool_mask({2, 3, 4, 4})), false);
  // Additive masks, with a gradient, broadcast over heads; and finite -1e9 entries.
  expect_same(input({2, 3, 5, 4}), input({2, 3, 6, 4}), input({2, 3, 6, 4}),
              AttnMask::additive(input({2, 1, 5, 6})), false);
  Tensor add = input({5, 5});
  add.data()(1, 3) = -1e9f;
  add.data()(4, 0) = -kInf;
  expect_same(input({3, 5, 4}), input({3, 5, 4}), input({3, 5, 4}), AttnMask::additive(add), true);
}

TEST_F(Attention, IsOneOpOnTheTape) {
  Tensor q = input({1, 2, 3, 4});
  Tensor y = scaled_dot_product_attention(q, q, q, AttnMask(), true);
  EXPECT_EQ(y.op_name(), "scaled_dot_product_attention");
  EXPECT_EQ(y.shape(), (Shape{1, 2, 3, 4}));
}

TEST_F(Attention, Gradcheck) {
  check([](const Inputs& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); },
        {input({2, 2, 3, 4}), input({2, 2, 5, 4}), input({2, 2, 5, 3})});
  check([](const Inputs& x) { return scaled_dot_product_attention(x[0], x[1], x[2], AttnMask(), true); },
        {input({2, 4, 3}), input({2, 4, 3}), input({2, 4, 3})});
  const Tensor bm = bool_mask({2, 1, 3, 5});
  check([bm](const Inputs& x) {
          return scaled_dot_product_attention(x[0], x[1], x[2], AttnMask::boolean(bm), true);
        },
        {input({2, 2, 3, 4}), input({2, 2, 5, 4}), input({2, 2, 5, 3})});
  check([](const Inputs& x) {
          return scaled_dot_product_attention(x[0], x[1], x[2], AttnMask::additive(x[3]));
        },
        {input({2, 2, 3, 4}), input({2, 2, 5, 4}), input({2, 2, 5, 3}), input({2, 1, 3, 5})});
  // Self-attention: the same tensor as q, k and v.
  check([](const Inputs& x) { return scaled_dot_product_attention(x[0], x[0], x[0], AttnMask(), true); },
        {input({2, 4, 3})});
}

TEST_F(Attention, AllMaskedRowIsZeroWithoutNaN) {
  // Row 1 of batch 0 masks every key; with an additive -inf row the same rule holds.
  Tensor m = bool_mask({2, 1, 4, 5});
  for (int64_t j = 0; j < 5; ++j) m.data()(0, 0, 1, j) = 1.0f;
  Tensor q = input({2, 2, 4, 3}), k = input({2, 2, 5, 3}), v = input({2, 2, 5, 3});
  for (const AttnMask& mask : {AttnMask::boolean(m), AttnMask::additive(masked_fill(zeros({2, 1, 4, 5}), m, -kInf))}) {
    q.set_grad(Tensor()), k.set_grad(Tensor()), v.set_grad(Tensor());
    Tensor w;
    Tensor y = scaled_dot_product_attention(q, k, v, mask, false, 0.0f, true, &w);
    Tensor ref = unfused(q, k, v, mask).detach();
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d < 3; ++d) EXPECT_EQ(y.data()(0, h, 1, d), 0.0f);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(w.data()(0, h, 1, j), 0.0f);
    // Every other row matches the unfused op (which gives NaN on the masked row).
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < 4; ++i)
          for (int64_t d = 0; d < 3; ++d) {
            if (b == 0 && i == 1) {
              EXPECT_TRUE(std::isnan(ref.data()(b, h, i, d)));  // what PyTorch-style softmax gives
              continue;
            }
            EXPECT_NEAR(y.data()(b, h, i, d), ref.data()(b, h, i, d), 1e-6);
          }
    sum(y * y).backward();
    for (const Tensor& t : {q, k, v})
      for (float g : t.grad().to_vector()) EXPECT_FALSE(std::isnan(g));
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d < 3; ++d) EXPECT_EQ(q.grad().data()(0, h, 1, d), 0.0f);
  }
  check([m](const Inputs& x) { return scaled_dot_product_attention(x[0], x[1], x[2], AttnMask::boolean(m)); },
        {q, k, v});
  // Causal with more keys masked than exist: Tk = 1 can never be all masked, but a boolean
  // mask on key 0 together with causal masks all of row 0.
  Tensor m0 = zeros({3, 3});
  m0.data()(0, 0) = 1.0f;
  Tensor y0 = scaled_dot_product_attention(input({3, 2}), input({3, 2}), input({3, 2}), AttnMask::boolean(m0), true);
  EXPECT_EQ(y0.data()(0, 0), 0.0f);
  EXPECT_EQ(y0.data()(0, 1), 0.0f);
  EXPECT_NE(y0.data()(1, 0), 0.0f);
}

TEST_F(Attention, ReturnsTheWeights) {
  Tensor q = input({2, 3, 4, 5}), k = input({2, 3, 6, 5}), v = input({2, 3, 6, 2});
  const Tensor bm = bool_mask({4, 6});
  Tensor w;
  Tensor y = scaled_dot_product_attention(q, k, v, AttnMask::boolean(bm), true, 0.0f, true, &w);
  ASSERT_EQ(w.shape(), (Shape{2, 3, 4, 6}));
  EXPECT_FALSE(w.requires_grad());
  Tensor s = matmul(q, transpose(k, -2, -1)) * (1.0f / std::sqrt(5.0f));
  s = masked_fill(masked_fill(s, bm, -kInf), causal_mask(4, 6), -kInf);
  const auto ref = softmax(s, -1).to_vector(), got = w.to_vector();
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-6);
  const auto yw = matmul(w, v).to_vector(), yv = y.to_vector();
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_NEAR(yv[i], yw[i], 1e-6);
}

TEST_F(Attention, DropoutOnTheWeights) {
  Tensor q = input({2, 2, 5, 4}), k = input({2, 2, 5, 4}), v = input({2, 2, 5, 4});
  // Not training: dropout is off.
  Tensor w_eval;
  Tensor y_eval = scaled_dot_product_attention(q, k, v, AttnMask(), false, 0.5f, false, &w_eval);
  const auto plain = scaled_dot_product_attention(q, k, v).to_vector();
  EXPECT_EQ(y_eval.to_vector(), plain);
  // Training: each weight is 0 or the plain weight / (1 - p), and the output uses those.
  Tensor w;
  Tensor y = scaled_dot_product_attention(q, k, v, AttnMask(), false, 0.5f, true, &w);
  int zeros_seen = 0;
  const auto wd = w.to_vector(), wp = w_eval.to_vector();
  for (size_t i = 0; i < wd.size(); ++i) {
    if (wd[i] == 0.0f) ++zeros_seen;
    else EXPECT_NEAR(wd[i], 2.0f * wp[i], 1e-6);
  }
  EXPECT_GT(zeros_seen, 10);
  EXPECT_LT(zeros_seen, 90);
  const auto yw = matmul(w, v).to_vector(), yv = y.to_vector();
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_NEAR(yv[i], yw[i], 1e-6);
  // With the generator reseeded inside, the dropped op is a fixed function: gradcheck it.
  check([](const Inputs& x) {
          manual_seed(11);
          return scaled_dot_product_attention(x[0], x[1], x[2], AttnMask(), true, 0.3f, true);
        },
        {input({2, 4, 3}), input({2, 4, 3}), input({2, 4, 3})});
}

TEST_F(Attention, BadInput) {
  const Tensor q = input({2, 3, 4}), k = input({2, 5, 4}), v = input({2, 5, 4});
  EXPECT_THROW(scaled_dot_product_attention(q, input({2, 5, 3}), v), ShapeError);  // D differs
  EXPECT_THROW(scaled_dot_product_attention(q, k, input({2, 4, 4})), ShapeError);  // Tk differs
  EXPECT_THROW(scaled_dot_product_attention(q, input({3, 5, 4}), input({3, 5, 4})), ShapeError);
  EXPECT_THROW(scaled_dot_product_attention(input({4}), input({4}), input({4})), ShapeError);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, AttnMask::boolean(zeros({3, 4}))), ShapeError);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, AttnMask::additive(zeros({3, 3, 5}))), ShapeError);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, AttnMask(), false, 1.5f), ValueError);
  EXPECT_THROW(scaled_dot_product_attention(q, k, Tensor()), ValueError);
  try {
    scaled_dot_product_attention(q, k, v, AttnMask::boolean(zeros({3, 4})));
  } catch (const ShapeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("scaled_dot_product_attention"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3, 4]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2, 3, 5]"), std::string::npos) << msg;
  }
}

// ---- the fused causal kernel against the reference kernel ------------------------------------

namespace {
/// Sets the fused kernel's tiles for one scope.
class TilesScope {
 public:
  explicit TilesScope(detail::AttentionTiles t) : previous_(detail::attention_tiles()) {
    detail::set_attention_tiles(t);
  }
  ~TilesScope() { detail::set_attention_tiles(previous_); }

 private:
  detail::AttentionTiles previous_;
};

/// Output and gradients of sum(y * r) w.r.t. q, k, v (r fixed random), flattened.
std::vector<std::vector<float>> run_causal(const Tensor& q, const Tensor& k, const Tensor& v,
                                           const AttnMask& mask, bool reference) {
  for (const Tensor& t : {q, k, v}) t.set_grad(Tensor());
  Tensor y;
  if (reference) {
    detail::ReferenceAttentionScope scope;
    y = scaled_dot_product_attention(q, k, v, mask, true);
  } else {
    y = scaled_dot_product_attention(q, k, v, mask, true);
  }
  manual_seed(7);
  sum(y * rand(y.shape())).backward();
  return {y.to_vector(), q.grad().to_vector(), k.grad().to_vector(), v.grad().to_vector()};
}

/// The fused causal kernel equals the reference kernel: output and q, k, v gradients.
void expect_fused_equals_reference(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const AttnMask& mask = AttnMask()) {
  const auto fused = run_causal(q, k, v, mask, false), ref = run_causal(q, k, v, mask, true);
  const char* what[] = {"output", "dq", "dk", "dv"};
  for (size_t t = 0; t < 4; ++t) {
    ASSERT_EQ(fused[t].size(), ref[t].size());
    for (size_t i = 0; i < ref[t].size(); ++i)
      ASSERT_NEAR(fused[t][i], ref[t][i], 1e-5 + 1e-4 * std::abs(ref[t][i]))
          << what[t] << " element " << i << ", q " << to_string(q.shape()) << ", k "
          << to_string(k.shape());
  }
}

/// Bytes at the peak of forward + backward, above what was live before.
int64_t peak_of_step(const Tensor& q, const Tensor& k, const Tensor& v) {
  for (const Tensor& t : {q, k, v}) t.set_grad(Tensor());
  const int64_t before = memory_stats().live_bytes;
  reset_peak_memory_stats();
  {
    Tensor y = scaled_dot_product_attention(q, k, v, AttnMask(), true);
    y.backward(ones(y.shape()));
  }
  return memory_stats().peak_bytes - before;
}
}  // namespace

TEST_F(Attention, FusedCausalEqualsReferenceOverBlockEdges) {
  ASSERT_EQ(detail::attention_tiles().q, 32);  // the grid below straddles these edges
  ASSERT_EQ(detail::attention_tiles().k, 128);
  for (int64_t T : {1, 2, 17, 64, 129})
    for (int64_t D : {1, 8, 64}) {
      SCOPED_TRACE("T " + std::to_string(T) + ", D " + std::to_string(D));
      expect_fused_equals_reference(input({2, 3, T, D}), input({2, 3, T, D}), input({2, 3, T, D}));
    }
  // Other batch dims: none, one, three; and Dv != D.
  expect_fused_equals_reference(input({65, 4}), input({65, 4}), input({65, 4}));
  expect_fused_equals_reference(input({3, 70, 5}), input({3, 70, 5}), input({3, 70, 2}));
  expect_fused_equals_reference(input({2, 1, 2, 20, 3}), input({2, 1, 2, 20, 3}), input({2, 1, 2, 20, 7}));
  // Small and unequal tiles: many edges, tiles that end past Tq or Tk, rows of a tile with no
  // key yet (bq > bk), and with masks that empty whole rows.
  for (detail::AttentionTiles t : {detail::AttentionTiles{4, 8, 1}, {8, 3, 1}, {1, 1, 1}, {5, 128, 1}, {64, 64, 1}}) {
    SCOPED_TRACE("tiles " + std::to_string(t.q) + " x " + std::to_string(t.k));
    TilesScope tiles(t);
    expect_fused_equals_reference(input({2, 2, 19, 3}), input({2, 2, 19, 3}), input({2, 2, 19, 2}));
    expect_fused_equals_reference(input({2, 9, 3}), input({2, 23, 3}), input({2, 23, 3}));
    expect_fused_equals_reference(input({2, 23, 3}), input({2, 9, 3}), input({2, 9, 3}));
    Tensor m = bool_mask({2, 1, 19, 19});
    for (int64_t j = 0; j < 19; ++j) m.data()(1, 0, 6, j) = 1.0f;
    expect_fused_equals_reference(input({2, 2, 19, 3}), input({2, 2, 19, 3}), input({2, 2, 19, 2}),
                                  AttnMask::boolean(m));
  }
  EXPECT_THROW(detail::set_attention_tiles({0, 64, 1}), ValueError);
  EXPECT_THROW(detail::set_attention_tiles({32, 64, 0}), ValueError);
}

TEST_F(Attention, ShortCausalRunsTheReferenceKernelByDefault) {
  // Below min_keys keys the reference kernel runs: its saved score matrix shows in the peak.
  detail::set_attention_tiles(detail::AttentionTiles());
  const int64_t B = 2, H = 4, T = 100, D = 16;
  Tensor q = input({B, H, T, D}), k = input({B, H, T, D}), v = input({B, H, T, D});
  EXPECT_GE(peak_of_step(q, k, v), B * H * T * T * 4);
  Tensor q2 = input({B, H, 128, D}), k2 = input({B, H, 128, D}), v2 = input({B, H, 128, D});
  EXPECT_LT(peak_of_step(q2, k2, v2), B * H * 128 * 128 * 4);  // the reference saves 2 such
}

TEST_F(Attention, FusedCausalReadsViews) {
  // q, k, v as (B, H, T, Dh) views of one packed (B, T, 3·H·Dh) projection, read in place.
  const int64_t B = 2, T = 67, H = 3, Dh = 8;
  Tensor x = input({B, T, 3 * H * Dh});
  auto heads = [&](int64_t part) {
    return transpose(reshape(slice(x, -1, part * H * Dh, (part + 1) * H * Dh), {B, T, H, Dh}), 1, 2);
  };
  ASSERT_FALSE(heads(0).is_contiguous());
  auto run = [&](bool reference) {
    x.set_grad(Tensor());
    Tensor q = heads(0), k = heads(1), v = heads(2);
    Tensor y;
    if (reference) {
      detail::ReferenceAttentionScope scope;
      y = scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous(), AttnMask(), true);
    } else {
      y = scaled_dot_product_attention(q, k, v, AttnMask(), true);
    }
    manual_seed(5);
    sum(y * rand(y.shape())).backward();
    return std::make_pair(y.to_vector(), x.grad().to_vector());
  };
  const auto fused = run(false), ref = run(true);
  for (size_t i = 0; i < ref.first.size(); ++i) ASSERT_NEAR(fused.first[i], ref.first[i], 1e-5) << i;
  for (size_t i = 0; i < ref.second.size(); ++i)
    ASSERT_NEAR(fused.second[i], ref.second[i], 1e-5 + 1e-4 * std::abs(ref.second[i])) << i;
}

TEST_F(Attention, FusedCausalCrossLengthsAreTopLeftAligned) {
  // Key j is excluded for query i when j > i, whatever Tq and Tk are: with Tq > Tk the last
  // rows see every key, with Tq < Tk the keys past Tq are never seen.
  for (auto [tq, tk] : {std::pair<int64_t, int64_t>{70, 130}, {130, 65}, {3, 1}, {1, 5}, {64, 65}}) {
    SCOPED_TRACE("Tq " + std::to_string(tq) + ", Tk " + std::to_string(tk));
    const Tensor q = input({2, tq, 4}), k = input({2, tk, 4}), v = input({2, tk, 3});
    expect_fused_equals_reference(q, k, v);
    const auto fused = scaled_dot_product_attention(q, k, v, AttnMask(), true).to_vector();
    const auto composed = unfused(q, k, v, AttnMask(), true).to_vector();
    for (size_t i = 0; i < composed.size(); ++i) ASSERT_NEAR(fused[i], composed[i], 1e-5) << i;
  }
  // Tq < Tk: the values of keys past Tq do not matter.
  Tensor q = input({1, 3, 2}), k = input({1, 5, 2}), v = input({1, 5, 2});
  const auto before = scaled_dot_product_attention(q, k, v, AttnMask(), true).to_vector();
  Tensor v2 = v.detach().clone();
  v2.data()(0, 4, 0) = 100.0f;
  EXPECT_EQ(scaled_dot_product_attention(q, k, v2, AttnMask(), true).to_vector(), before);
}

TEST_F(Attention, FusedCausalWithMasksAndAllMaskedRows) {
  // A boolean key-padding mask and an additive mask without a gradient ride along with the
  // causal rule; row 3 of batch 0 and row 70 of batch 1 have every key masked (the boolean
  // mask covers keys 0..i), and so do the rows below 2 of the additive one.
  const int64_t B = 2, H = 2, T = 75, D = 4;
  Tensor bm = zeros({B, 1, T, T});
  for (int64_t i = 0; i < T; ++i) bm.data()(1, 0, i, 0) = i % 5 == 1 ? 1.0f : 0.0f;
  for (int64_t j = 0; j <= 3; ++j) bm.data()(0, 0, 3, j) = 1.0f;
  for (int64_t j = 0; j <= 70; ++j) bm.data()(1, 0, 70, j) = 1.0f;
  Tensor am = input({T, T}).detach();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < T; ++j) am.data()(i, j) = -kInf;
  const Tensor q = input({B, H, T, D}), k = input({B, H, T, D}), v = input({B, H, T, D});
  expect_fused_equals_reference(q, k, v, AttnMask::boolean(bm));
  expect_fused_equals_reference(q, k, v, AttnMask::additive(am));
  // The masked rows: zero output and zero gradient, no NaN anywhere.
  for (const Tensor& t : {q, k, v}) t.set_grad(Tensor());
  Tensor y = scaled_dot_product_attention(q, k, v, AttnMask::boolean(bm), true);
  sum(y * y + y).backward();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = 0; d < D; ++d) {
      EXPECT_EQ(y.data()(0, h, 3, d), 0.0f);
      EXPECT_EQ(y.data()(1, h, 70, d), 0.0f);
      EXPECT_EQ(q.grad().data()(0, h, 3, d), 0.0f);
      EXPECT_EQ(q.grad().data()(1, h, 70, d), 0.0f);
    }
  for (const Tensor& t : {q, k, v})
    for (float g : t.grad().to_vector()) ASSERT_FALSE(std::isnan(g));
}

TEST_F(Attention, FusedCausalGradcheck) {
  check([](const Inputs& x) { return scaled_dot_product_attention(x[0], x[1], x[2], AttnMask(), true); },
        {input({2, 5, 3}), input({2, 5, 3}), input({2, 5, 2})});
  // Across a query and a key block edge, Tq != Tk.
  check([](const Inputs& x) { return scaled_dot_product_attention(x[0], x[1], x[2], AttnMask(), true); },
        {input({1, 66, 2}), input({1, 68, 2}), input({1, 68, 1})});
  const Tensor bm = bool_mask({2, 1, 6, 6});
  check([bm](const Inputs& x) {
          return scaled_dot_product_attention(x[0], x[1], x[2], AttnMask::boolean(bm), true);
        },
        {input({2, 2, 6, 3}), input({2, 2, 6, 3}), input({2, 2, 6, 3})});
  // Self-attention: one tensor as q, k and v.
  check([](const Inputs& x) { return scaled_dot_product_attention(x[0], x[0], x[0], AttnMask(), true); },
        {input({2, 7, 3})});
}

TEST_F(Attention, FusedCausalRefusesChangedInputs) {
  Tensor x = input({2, 5, 3}) * 1.0f;
  Tensor y = scaled_dot_product_attention(x, x, x, AttnMask(), true);
  x.mul_(2.0f);
  EXPECT_THROW(sum(y).backward(), Error);
}

TEST_F(Attention, FusedCausalSavesNoScoreMatrix) {
  // B·H = 8 heads, T = 256: one (Tq, Tk) matrix per head is 2 MiB; q, k, v, y and their
  // gradients are 128 KiB each. The reference saves P and builds dS (two such matrices); the
  // fused kernel keeps one tile per thread and a logsumexp per row.
  const int64_t B = 2, H = 4, T = 256, D = 16;
  const int64_t scores = B * H * T * T * 4, operand = B * H * T * D * 4;
  Tensor q = input({B, H, T, D}), k = input({B, H, T, D}), v = input({B, H, T, D});
  const int64_t fused = peak_of_step(q, k, v);
  int64_t reference = 0;
  {
    detail::ReferenceAttentionScope scope;
    reference = peak_of_step(q, k, v);
  }
  EXPECT_GE(reference, 2 * scores);
  EXPECT_LT(fused, 8 * operand) << "fused " << fused << " bytes, reference " << reference;
  EXPECT_LT(fused, scores / 2);
}

TEST_F(Attention, FusedCausalSplitsHeadsAcrossThreads) {
  // Each head is computed by the same code whichever thread takes it: the results at 3 threads
  // equal those at 1 bit for bit, and the reference kernel's within float tolerance.
  const Tensor q = input({2, 5, 40, 8}), k = input({2, 5, 40, 8}), v = input({2, 5, 40, 8});
  set_num_threads(1);
  const auto one = run_causal(q, k, v, AttnMask(), false);
  set_num_threads(3);
  const auto three = run_causal(q, k, v, AttnMask(), false);
  expect_fused_equals_reference(q, k, v);
  set_num_threads(1);
  for (size_t t = 0; t < one.size(); ++t) EXPECT_EQ(one[t], three[t]) << "output/dq/dk/dv " << t;
}
