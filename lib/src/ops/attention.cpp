// Scaled-dot-product attention as one fused op: scores, mask, softmax, dropout and the
// weighted sum of values in one forward, and one backward closure. Every product is a GEMM
// with transpose flags on the operands where they lie (no transposed copies); the operand
// layouts are strided (attention.h), so multi-head attention runs on its (B, T, H·Dh)
// projections directly.
//
// Legend: B = batch, H = heads, N = B·H, Tq = queries, Tk = keys, D = head dim,
// Dv = value head dim. S = scores, P = softmax weights, Pd = P after dropout.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "ops/attention.h"
#include "backend/gemm.h"
#include "backend/vec.h"
#include "ops/lane_sum.h"
#include "tapegrad/random.h"

namespace tg {
namespace detail {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// C(b, h) = alpha · op(A(b, h)) · op(B(b, h)) for every batch b and head h.
void batched_gemm(int64_t nb, int64_t nh, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                  float alpha, const float* A, const HeadLayout& la, const float* Bm,
                  const HeadLayout& lb, float* C, const HeadLayout& lc) {
  for (int64_t b = 0; b < nb; ++b)
    gemm::gemm_strided_batched(ta, tb, M, N, K, alpha, A + b * la.sb, la.ld, la.sh,
                               Bm + b * lb.sb, lb.ld, lb.sh, 0.0f, C + b * lc.sb, lc.ld, lc.sh,
                               nh);
}

// Where the mask lives for each of the N score matrices, and its strides along Tq and Tk
// (0 where it broadcasts).
struct MaskIndex {
  std::vector<int64_t> offset;  // per flat batch n
  int64_t sq = 0, sk = 0;
};

MaskIndex index_mask(const Shape& ms, const Shape& full, const char* op) {
  if (!broadcasts_to(ms, full))
    shape_error(op, "attn_mask of shape " + to_string(ms) + " does not broadcast to the scores' shape " +
                        to_string(full) + " (..., Tq, Tk)");
  const std::vector<int64_t> stride = broadcast_strides(ms, full);
  const size_t r = full.size();
  MaskIndex mi;
  mi.sq = stride[r - 2];
  mi.sk = stride[r - 1];
  mi.offset = strided_offsets(Shape(full.begin(), full.end() - 2),
                              std::vector<int64_t>(stride.begin(), stride.end() - 2));
  return mi;
}

}  // namespace

// S = (Q Kᵀ)/√D + mask,  P = softmax(S) (row of -inf only: P = 0),  Pd = P ⊙ M/(1-p),  O = Pd V
//   dV = Pdᵀ G,  dP = (G Vᵀ) ⊙ M/(1-p),  dS = P ⊙ (dP - Σ_j dP ⊙ P),
//   dQ = dS K/√D,  dK = dSᵀ Q/√D,  dmask = dS
Tensor attention(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                 const AttnMask& mask_arg, bool is_causal, float dropout_p, bool training,
                 Tensor* weights) {
  AttnMask mask = mask_arg;  // the kernel reads the mask's values as one row-major block
  if (mask.defined() && !mask.values.is_contiguous()) mask.values = mask.values.contiguous();
  if (!(dropout_p >= 0.0f && dropout_p <= 1.0f))
    throw ValueError(std::string(s.op) + ": dropout_p must be in [0, 1], got " +
                     std::to_string(dropout_p));
  const int64_t N = s.B * s.H, Tq = s.Tq, Tk = s.Tk;
  Shape full = s.lead;
  full.push_back(Tq);
  full.push_back(Tk);
  MaskIndex mi;
  const float* pm = nullptr;
  if (mask.defined()) {
    mi = index_mask(mask.values.shape(), full, s.op);
    pm = val(mask.values).data();
  }
  const bool boolean = mask.is_boolean();
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.D));
  const HeadLayout lp{s.H * Tq * Tk, Tq * Tk, Tk};  // P, dS: (B, H, Tq, Tk) contiguous

  auto P = std::make_shared<Array>(Array::from_shape(to_xshape(full)));
  float* p = P->data();
  batched_gemm(s.B, s.H, false, true, Tq, Tk, s.D, scale, q.impl()->ptr(), s.q, k.impl()->ptr(), s.k,
               p, lp);
  // Softmax in three sweeps, so that exp runs vectorized over the whole of S at once:
  // masked scores and the row maximum (each row then holds S - max, -inf where masked),
  // exp (masked -> 0; a row whose keys are all masked becomes a defined zero row instead
  // of 0/0), and each row's normalisation.
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < Tq; ++i) {
      float* row = p + (n * Tq + i) * Tk;
      const float* m = pm ? pm + mi.offset[static_cast<size_t>(n)] + i * mi.sq : nullptr;
      const int64_t end = is_causal ? std::min(Tk, i + 1) : Tk;  // keys j > i are masked
      float mx = kNegInf;
      for (int64_t j = 0; j < end; ++j) {
        float x = row[j];
        if (m) {
          const float mv = m[j * mi.sk];
          x = boolean ? (mv != 0.0f ? kNegInf : x) : x + mv;
        }
        row[j] = x;
        mx = std::max(mx, x);
      }
      if (mx == kNegInf) mx = 0.0f;  // all masked: the row stays -inf
      for (int64_t j = 0; j < end; ++j) row[j] -= mx;
      std::fill(row + end, row + Tk, kNegInf);
    }
  vec::kernels().exp(p, p, P->size());
  for (int64_t r = 0; r < N * Tq; ++r) {
    float* row = p + r * Tk;
    const double z = lane_sum(static_cast<size_t>(Tk), [&](size_t j) { return row[j]; });
    if (z == 0) continue;  // all masked
    const float inv = static_cast<float>(1.0 / z);
    for (int64_t j = 0; j < Tk; ++j) row[j] *= inv;
  }

  std::shared_ptr<Array> keep;  // M/(1-p) per weight, when dropout is active
  Array dropped;                // Pd
  const float* pd = p;
  if (training && dropout_p > 0.0f) {
    keep = std::make_shared<Array>(Array::from_shape(P->shape()));
    const float kept = dropout_p == 1.0f ? 0.0f : 1.0f / (1.0f - dropout_p);
    default_generator().fill_uniform(keep->data(), static_cast<int64_t>(keep->size()));  // one lock
    for (auto& x : *keep) x = x >= dropout_p ? kept : 0.0f;
    dropped = *P * *keep;
    pd = dropped.data();
  }

  Array out = Array::from_shape(to_xshape(s.out_shape));
  batched_gemm(s.B, s.H, false, false, Tq, s.Dv, Tk, 1.0f, pd, lp, v.impl()->ptr(), s.v,
               out.data(), s.out);
  if (weights) *weights = make_leaf(keep ? std::move(dropped) : Array(*P));

  const Saved sq = Saved::strided(q), sk = Saved::strided(k), sv = Saved::strided(v);
  const Shape q_shape = q.shape(), k_shape = k.shape(), v_shape = v.shape();
  const Tensor mask_input = mask.defined() && !boolean ? mask.values : Tensor();
  return record(s.op, std::move(out), {q, k, v, mask_input},
                [s, sq, sk, sv, q_shape, k_shape, v_shape, P, keep, lp, full,
                 scale](BackwardContext& ctx) {
                  const int64_t N = s.B * s.H, Tq = s.Tq, Tk = s.Tk;
                  const float* g = ctx.grad.data();
                  if (ctx.needs(2)) {
                    Array pd_buf;
                    const float* pd = P->data();
                    if (keep) {
                      pd_buf = *P * *keep;
                      pd = pd_buf.data();
                    }
                    Array dv = Array::from_shape(to_xshape(v_shape));
                    batched_gemm(s.B, s.H, true, false, Tk, s.Dv, Tq, 1.0f, pd, lp, g, s.out,
                                 dv.data(), s.dv);
                    ctx.give(2, std::move(dv));
                  }
                  if (!(ctx.needs(0) || ctx.needs(1) || ctx.needs(3))) return;
                  Array ds = Array::from_shape(to_xshape(full));
                  float* d = ds.data();
                  batched_gemm(s.B, s.H, false, true, Tq, Tk, s.Dv, 1.0f, g, s.out, ctx.read_data(sv),
                               s.v, d, lp);
                  const float* p = P->data();
                  const float* kp = keep ? keep->data() : nullptr;
                  for (int64_t r = 0; r < N * Tq; ++r) {
                    float* dr = d + r * Tk;
                    const float* pr = p + r * Tk;
                    if (kp)
                      for (int64_t j = 0; j < Tk; ++j) dr[j] *= kp[r * Tk + j];
                    const float dot = static_cast<float>(lane_sum(
                        static_cast<size_t>(Tk), [&](size_t j) { return dr[j] * pr[j]; }));
                    for (int64_t j = 0; j < Tk; ++j) dr[j] = pr[j] * (dr[j] - dot);
                  }
                  if (ctx.needs(0)) {
                    Array dq = Array::from_shape(to_xshape(q_shape));
                    batched_gemm(s.B, s.H, false, false, Tq, s.D, Tk, scale, d, lp, ctx.read_data(sk),
                                 s.k, dq.data(), s.dq);
                    ctx.give(0, std::move(dq));
                  }
                  if (ctx.needs(1)) {
                    Array dk = Array::from_shape(to_xshape(k_shape));
                    batched_gemm(s.B, s.H, true, false, Tk, s.D, Tq, scale, d, lp, ctx.read_data(sq),
                                 s.q, dk.data(), s.dk);
                    ctx.give(1, std::move(dk));
                  }
                  if (ctx.needs(3)) ctx.give(3, std::move(ds));
                });
}

}  // namespace detail

using namespace detail;

namespace {
/// Where an operand of shape (lead..., T, D) keeps its matrices, split as B = all lead dims but
/// the last, H = the last: from its strides, so a (B, T, H, D) tensor's transpose(1, 2) view
/// is read in place. nullopt when they do not fit a HeadLayout (columns not adjacent, or the
/// B dims not one even step).
std::optional<HeadLayout> head_layout(const TensorImpl& t) {
  const size_t r = t.shape().size();
  const int64_t T = static_cast<int64_t>(t.shape()[r - 2]), D = static_cast<int64_t>(t.shape()[r - 1]);
  if (D != 1 && t.strides()[r - 1] != 1) return std::nullopt;
  HeadLayout l;
  l.ld = T == 1 ? D : t.strides()[r - 2];
  if (T > 1 && l.ld < D) return std::nullopt;  // overlapping rows (an expand)
  if (r >= 3) l.sh = t.shape()[r - 3] == 1 ? 0 : t.strides()[r - 3];
  std::vector<size_t> stepped;  // the B dims longer than 1
  for (size_t d = 0; d + 3 < r; ++d)
    if (t.shape()[d] != 1) stepped.push_back(d);
  for (size_t i = 0; i + 1 < stepped.size(); ++i)
    if (t.strides()[stepped[i]] != t.strides()[stepped[i + 1]] * static_cast<int64_t>(t.shape()[stepped[i + 1]]))
      return std::nullopt;
  l.sb = stepped.empty() ? 0 : t.strides()[stepped.back()];
  return l;
}

/// The layout of a dense (lead..., T, D) block, split like head_layout's.
HeadLayout dense_layout(const Shape& shape) {
  const size_t r = shape.size();
  const int64_t T = shape[r - 2], D = shape[r - 1], H = r >= 3 ? shape[r - 3] : 1;
  return {H * T * D, T * D, D};
}

/// The operand itself when the kernel can read it where it lies, else its contiguous copy.
const Tensor& attention_input(const Tensor& t, Tensor& copy, HeadLayout& layout) {
  if (auto l = head_layout(*t.impl())) {
    layout = *l;
    return t;
  }
  copy = t.contiguous();
  layout = *head_layout(*copy.impl());
  return copy;
}
}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q_arg, const Tensor& k_arg, const Tensor& v_arg,
                                    const AttnMask& attn_mask, bool is_causal, float dropout_p,
                                    bool training, Tensor* weights) {
  const char* op = "scaled_dot_product_attention";
  if (!q_arg.defined() || !k_arg.defined() || !v_arg.defined())
    throw ValueError(std::string(op) + ": query, key and value must be defined");
  const Shape qs = q_arg.shape(), ks = k_arg.shape(), vs = v_arg.shape();
  const std::string all = "query " + to_string(qs) + ", key " + to_string(ks) + ", value " + to_string(vs);
  if (qs.size() < 2 || ks.size() != qs.size() || vs.size() != qs.size())
    shape_error(op, "query, key and value must have the same rank >= 2 (..., T, D), got " + all);
  const Shape lead(qs.begin(), qs.end() - 2);
  if (Shape(ks.begin(), ks.end() - 2) != lead || Shape(vs.begin(), vs.end() - 2) != lead)
    shape_error(op, "query, key and value must have the same leading dims, got " + all);
  AttentionShape s;
  s.op = op;
  s.Tq = qs[qs.size() - 2];
  s.Tk = ks[ks.size() - 2];
  s.D = qs.back();
  s.Dv = vs.back();
  if (ks.back() != s.D)
    shape_error(op, "key last dim " + std::to_string(ks.back()) + " must equal query last dim " +
                        std::to_string(s.D) + ", got " + all);
  if (vs[vs.size() - 2] != s.Tk)
    shape_error(op, "value must have as many rows as key (" + std::to_string(s.Tk) + "), got " + all);
  if (numel_of(qs) == 0 || numel_of(ks) == 0 || numel_of(vs) == 0)
    shape_error(op, "empty inputs are not supported, got " + all);
  // Views ((B, T, H, D) projections seen as (B, H, T, D), say) are read where they lie.
  Tensor q_copy, k_copy, v_copy;
  const Tensor& q = attention_input(q_arg, q_copy, s.q);
  const Tensor& k = attention_input(k_arg, k_copy, s.k);
  const Tensor& v = attention_input(v_arg, v_copy, s.v);
  s.H = lead.empty() ? 1 : lead.back();
  s.B = numel_of(lead) / std::max<int64_t>(s.H, 1);
  s.dq = dense_layout(qs);
  s.dk = dense_layout(ks);
  s.dv = dense_layout(vs);
  s.out_shape = lead;
  s.out_shape.push_back(s.Tq);
  s.out_shape.push_back(s.Dv);
  s.out = dense_layout(s.out_shape);
  s.lead = lead;
  return attention(s, q, k, v, attn_mask, is_causal, dropout_p, training, weights);
}

}  // namespace tg
