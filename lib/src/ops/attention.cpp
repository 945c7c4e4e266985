// Scaled-dot-product attention as one fused op: scores, mask, softmax, dropout and the
// weighted sum of values in one forward, and one backward closure. Every product is a GEMM
// with transpose flags on the operands where they lie (no transposed copies); the operand
// layouts are strided (attention.h), so multi-head attention runs on its (B, T, H·Dh)
// projections directly.
//
// Legend: B = batch, H = heads, N = B·H, Tq = queries, Tk = keys, D = head dim,
// Dv = value head dim. S = scores, P = softmax weights, Pd = P after dropout.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <optional>

#include <xsimd/xsimd.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>

#include "ops/attention.h"
#include "backend/gemm.h"
#include "backend/parallel.h"
#include "backend/thread_pool.h"
#include "backend/vec.h"
#include "tapegrad/device.h"
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
    gemm::gemm_strided_batched(ta, tb, M, N, K, alpha, A + la.at + b * la.sb, la.ld, la.sh,
                               Bm + lb.at + b * lb.sb, lb.ld, lb.sh, 0.0f, C + lc.at + b * lc.sb,
                               lc.ld, lc.sh, nh);
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
Tensor reference_attention(const AttentionShape& s, const Tensor& q, const Tensor& k,
                           const Tensor& v, const AttnMask& mask, bool is_causal, float dropout_p,
                           bool training, Tensor* weights) {
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
  // of 0/0), and each row's normalisation. Each sweep splits its rows across threads.
  for_each_row(N * Tq, Tk, kGrain / 2, [&](int64_t r) {
    const int64_t n = r / Tq, i = r % Tq;
    float* row = p + r * Tk;
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
  });
  vec::kernels().exp(p, p, P->size());
  for_each_row(N * Tq, Tk, kGrain / 2, [&](int64_t r) {
    float* row = p + r * Tk;
    const double z = lane_sum(static_cast<size_t>(Tk), [&](size_t j) { return row[j]; });
    if (z == 0) return;  // all masked
    const float inv = static_cast<float>(1.0 / z);
    for (int64_t j = 0; j < Tk; ++j) row[j] *= inv;
  });

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
                  // Packed: dq, dk and dv all land in one array (every element written).
                  Array dqkv = s.packed && ctx.needs(0) ? Array::from_shape(to_xshape(q_shape)) : Array();
                  if (ctx.needs(2)) {
                    Array pd_buf;
                    const float* pd = P->data();
                    if (keep) {
                      pd_buf = *P * *keep;
                      pd = pd_buf.data();
                    }
                    Array dv = s.packed ? Array() : Array::from_shape(to_xshape(v_shape));
                    batched_gemm(s.B, s.H, true, false, Tk, s.Dv, Tq, 1.0f, pd, lp, g, s.out,
                                 s.packed ? dqkv.data() : dv.data(), s.dv);
                    if (!s.packed) ctx.give(2, std::move(dv));
                  }
                  if (!(ctx.needs(0) || ctx.needs(1) || ctx.needs(3))) return;
                  Array ds = Array::from_shape(to_xshape(full));
                  float* d = ds.data();
                  batched_gemm(s.B, s.H, false, true, Tq, Tk, s.Dv, 1.0f, g, s.out, ctx.read_data(sv),
                               s.v, d, lp);
                  const float* p = P->data();
                  const float* kp = keep ? keep->data() : nullptr;
                  for_each_row(N * Tq, Tk, kGrain / 2, [&](int64_t r) {  // dS by rows
                    float* dr = d + r * Tk;
                    const float* pr = p + r * Tk;
                    if (kp)
                      for (int64_t j = 0; j < Tk; ++j) dr[j] *= kp[r * Tk + j];
                    const float dot = static_cast<float>(lane_sum(
                        static_cast<size_t>(Tk), [&](size_t j) { return dr[j] * pr[j]; }));
                    for (int64_t j = 0; j < Tk; ++j) dr[j] = pr[j] * (dr[j] - dot);
                  });
                  if (ctx.needs(0)) {
                    Array dq = s.packed ? Array() : Array::from_shape(to_xshape(q_shape));
                    batched_gemm(s.B, s.H, false, false, Tq, s.D, Tk, scale, d, lp, ctx.read_data(sk),
                                 s.k, s.packed ? dqkv.data() : dq.data(), s.dq);
                    if (!s.packed) ctx.give(0, std::move(dq));
                  }
                  if (ctx.needs(1)) {
                    Array dk = s.packed ? Array() : Array::from_shape(to_xshape(k_shape));
                    batched_gemm(s.B, s.H, true, false, Tk, s.D, Tq, scale, d, lp, ctx.read_data(sq),
                                 s.q, s.packed ? dqkv.data() : dk.data(), s.dk);
                    if (!s.packed) ctx.give(1, std::move(dk));
                  }
                  if (s.packed && ctx.needs(0)) ctx.give(0, std::move(dqkv));
                  if (ctx.needs(3)) ctx.give(3, std::move(ds));
                });
}

// ---- the fused causal kernel -----------------------------------------------------------------
// FlashAttention's recurrence (Dao et al., 2022, with FlashAttention-2's loop order), one head
// at a time. For each tile of bq query rows i, over the tiles of bk keys j that reach its
// diagonal (the tiles above it are never computed):
//   S = Q_i K_jᵀ/√D (+ mask; key > query: -inf),   m' = max(m, rowmax S),   P = exp(S - m'),
//   l = l·exp(m - m') + rowsum P,                   O_i = O_i·exp(m - m') + P V_j
// then O_i /= l, and L_i = m + log l is the row's logsumexp, saved instead of P. The backward
// recomputes each tile, P = exp(S - L), and with Δ_i = rowsum(dO_i ⊙ O_i):
//   dV_j += Pᵀ dO_i,  dP = dO_i V_jᵀ,  dS = P ⊙ (dP - Δ),  dQ_i += dS K_j/√D,  dK_j += dSᵀ Q_i/√D
// A row whose keys are all masked keeps l = 0: its output is 0 and L = +inf, so P = 0 and it
// passes no gradient (the reference kernel's rule). Every product is one small GEMM on the
// CPU (cpu_gemm); the heads are split across tapegrad's threads.

namespace {

using Batch = xsimd::batch<float>;
std::atomic<int64_t> g_tile_q{AttentionTiles{}.q}, g_tile_k{AttentionTiles{}.k},
    g_min_keys{AttentionTiles{}.min_keys};  // attention_tiles()
constexpr float kPosInf = std::numeric_limits<float>::infinity();

/// row[j] = exp(row[j] - shift) for j < n (shift finite; exp(-inf) = 0); returns their sum.
float exp_shifted(float* row, int64_t n, float shift) {
  constexpr int64_t L = static_cast<int64_t>(Batch::size);
  const Batch sh(shift);
  Batch acc(0.0f);
  int64_t j = 0;
  for (; j + L <= n; j += L) {
    const Batch e = xsimd::exp(Batch::load_unaligned(row + j) - sh);
    e.store_unaligned(row + j);
    acc += e;
  }
  float sum = xsimd::hadd(acc);
  for (; j < n; ++j) {
    row[j] = std::exp(row[j] - shift);
    sum += row[j];
  }
  return sum;
}

/// max_j row[j] over j < n (-inf if n = 0).
float row_max(const float* row, int64_t n) {
  constexpr int64_t L = static_cast<int64_t>(Batch::size);
  float mx = kNegInf;
  int64_t j = 0;
  if (n >= L) {
    Batch acc = Batch::load_unaligned(row);
    for (j = L; j + L <= n; j += L) acc = xsimd::max(acc, Batch::load_unaligned(row + j));
    alignas(64) float lanes[L];
    acc.store_aligned(lanes);
    for (int64_t l = 0; l < L; ++l) mx = std::max(mx, lanes[l]);
  }
  for (; j < n; ++j) mx = std::max(mx, row[j]);
  return mx;
}

/// What the forward and the backward of one call share: the sizes and operands.
struct CausalPlan {
  AttentionShape s;
  float scale = 1.0f;
  const float *q = nullptr, *k = nullptr, *v = nullptr;  // element 0 of each operand
  const float* mask = nullptr;                           // row-major, indexed by mi
  MaskIndex mi;
  bool boolean = false;
  int64_t bq = 0, bk = 0;  // the tile: bq queries × bk keys (attention_tiles())
};

/// One head's matrices (head n = b·H + h).
struct HeadPtr {
  const float *q, *k, *v, *mask;
};

HeadPtr head_of(const CausalPlan& c, int64_t n) {
  const int64_t b = n / c.s.H, h = n % c.s.H;
  return {c.q + c.s.q.at + b * c.s.q.sb + h * c.s.q.sh, c.k + c.s.k.at + b * c.s.k.sb + h * c.s.k.sh,
          c.v + c.s.v.at + b * c.s.v.sb + h * c.s.v.sh,
          c.mask ? c.mask + c.mi.offset[static_cast<size_t>(n)] : nullptr};
}

/// Zeroes rows × cols of a tile whose rows are ld apart.
void zero_tile(float* t, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) std::fill(t + r * ld, t + r * ld + cols, 0.0f);
}

/// The scores of rows i0.., keys k0.. (rows × cols, row stride bk) into S: Q Kᵀ/√D, the mask
/// applied, and -inf on every key j > query i. The tile is zeroed here and the product added
/// to it (beta = 1): with beta = 0 OpenBLAS makes a separate pass over C to zero it.
void score_tile(const CausalPlan& c, const HeadPtr& hp, int64_t i0, int64_t rows, int64_t k0,
                int64_t cols, float* S) {
  zero_tile(S, rows, cols, c.bk);
  gemm::cpu_gemm(false, true, rows, cols, c.s.D, c.scale, hp.q + i0 * c.s.q.ld, c.s.q.ld,
                 hp.k + k0 * c.s.k.ld, c.s.k.ld, 1.0f, S, c.bk);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = S + r * c.bk;
    const int64_t i = i0 + r;
    const int64_t visible = std::max<int64_t>(0, std::min(cols, i - k0 + 1));  // keys j <= i
    if (hp.mask) {
      const float* m = hp.mask + i * c.mi.sq + k0 * c.mi.sk;
      for (int64_t j = 0; j < visible; ++j) {
        const float mv = m[j * c.mi.sk];
        row[j] = c.boolean ? (mv != 0.0f ? kNegInf : row[j]) : row[j] + mv;
      }
    }
    std::fill(row + visible, row + cols, kNegInf);
  }
}

/// The forward of head n: its output rows (layout s.out) and logsumexps lse[Tq].
/// scratch: bq·bk + 2·bq floats.
void causal_forward_head(const CausalPlan& c, int64_t n, float* out, float* lse, float* scratch) {
  const AttentionShape& s = c.s;
  const HeadPtr hp = head_of(c, n);
  float* O = out + s.out.at + (n / s.H) * s.out.sb + (n % s.H) * s.out.sh;
  const int64_t lo = s.out.ld;
  float* S = scratch;          // (bq, bk)
  float* m = S + c.bq * c.bk;  // running max per row
  float* l = m + c.bq;         // running sum per row
  for (int64_t i0 = 0; i0 < s.Tq; i0 += c.bq) {
    const int64_t rows = std::min(c.bq, s.Tq - i0);
    const int64_t kend = std::min(s.Tk, i0 + rows);  // the last row sees keys < i0 + rows
    std::fill(m, m + rows, kNegInf);
    std::fill(l, l + rows, 0.0f);
    for (int64_t r = 0; r < rows; ++r) std::fill(O + (i0 + r) * lo, O + (i0 + r) * lo + s.Dv, 0.0f);
    for (int64_t k0 = 0; k0 < kend; k0 += c.bk) {
      const int64_t cols = std::min(c.bk, kend - k0);
      score_tile(c, hp, i0, rows, k0, cols, S);
      for (int64_t r = 0; r < rows; ++r) {
        float* row = S + r * c.bk;
        const float m_new = std::max(m[r], row_max(row, cols));
        if (m_new == kNegInf) {  // no key of this row seen yet: P = 0
          std::fill(row, row + cols, 0.0f);
          continue;
        }
        const float rescale = std::exp(m[r] - m_new);  // 0 on the row's first keys
        l[r] = l[r] * rescale + exp_shifted(row, cols, m_new);
        if (rescale != 1.0f) {
          float* o = O + (i0 + r) * lo;
          for (int64_t d = 0; d < s.Dv; ++d) o[d] *= rescale;
        }
        m[r] = m_new;
      }
      gemm::cpu_gemm(false, false, rows, s.Dv, cols, 1.0f, S, c.bk, hp.v + k0 * s.v.ld, s.v.ld, 1.0f,
                     O + i0 * lo, lo);
    }
    for (int64_t r = 0; r < rows; ++r) {
      if (l[r] == 0.0f) {  // all keys masked: O stays 0
        lse[i0 + r] = kPosInf;
        continue;
      }
      const float inv = 1.0f / l[r];
      float* o = O + (i0 + r) * lo;
      for (int64_t d = 0; d < s.Dv; ++d) o[d] *= inv;
      lse[i0 + r] = m[r] + std::log(l[r]);
    }
  }
}

/// Where head n's gradients go (null: not needed), in the layouts s.dq, s.dk, s.dv.
struct HeadGrads {
  float *dq, *dk, *dv;
};

/// The backward of head n: adds into its dq, dk, dv. g and o: dL/dO and O (layout s.out).
/// scratch: 2·bq·bk + Tq floats.
void causal_backward_head(const CausalPlan& c, int64_t n, const float* g, const float* o,
                          const float* lse, HeadGrads dg, float* scratch) {
  const AttentionShape& s = c.s;
  const HeadPtr hp = head_of(c, n);
  const int64_t b = n / s.H, h = n % s.H;
  const int64_t lo = s.out.ld;
  const float* G = g + s.out.at + b * s.out.sb + h * s.out.sh;
  const float* O = o + s.out.at + b * s.out.sb + h * s.out.sh;
  float* dQ = dg.dq ? dg.dq + s.dq.at + b * s.dq.sb + h * s.dq.sh : nullptr;
  float* dK = dg.dk ? dg.dk + s.dk.at + b * s.dk.sb + h * s.dk.sh : nullptr;
  float* dV = dg.dv ? dg.dv + s.dv.at + b * s.dv.sb + h * s.dv.sh : nullptr;
  float* P = scratch;               // (bq, bk)
  float* dS = P + c.bq * c.bk;      // (bq, bk)
  float* delta = dS + c.bq * c.bk;  // (Tq)
  for (int64_t i = 0; i < s.Tq; ++i) {
    const float* gi = G + i * lo;
    const float* oi = O + i * lo;
    delta[i] = static_cast<float>(
        lane_sum(static_cast<size_t>(s.Dv), [&](size_t d) { return gi[d] * oi[d]; }));
  }
  for (int64_t i0 = 0; i0 < s.Tq; i0 += c.bq) {
    const int64_t rows = std::min(c.bq, s.Tq - i0);
    const int64_t kend = std::min(s.Tk, i0 + rows);
    for (int64_t k0 = 0; k0 < kend; k0 += c.bk) {
      const int64_t cols = std::min(c.bk, kend - k0);
      score_tile(c, hp, i0, rows, k0, cols, P);
      for (int64_t r = 0; r < rows; ++r) {
        float* row = P + r * c.bk;
        const float L = lse[i0 + r];
        if (L == kPosInf) std::fill(row, row + cols, 0.0f);  // all keys masked
        else exp_shifted(row, cols, L);
      }
      if (dV)
        gemm::cpu_gemm(true, false, cols, s.Dv, rows, 1.0f, P, c.bk, G + i0 * lo, lo, 1.0f,
                       dV + k0 * s.dv.ld, s.dv.ld);
      if (!dQ && !dK) continue;
      zero_tile(dS, rows, cols, c.bk);  // and beta = 1, as in score_tile
      gemm::cpu_gemm(false, true, rows, cols, s.Dv, 1.0f, G + i0 * lo, lo, hp.v + k0 * s.v.ld,
                     s.v.ld, 1.0f, dS, c.bk);
      for (int64_t r = 0; r < rows; ++r) {
        const float* pr = P + r * c.bk;
        float* dr = dS + r * c.bk;
        const float di = delta[i0 + r];
        for (int64_t j = 0; j < cols; ++j) dr[j] = pr[j] * (dr[j] - di);
      }
      if (dQ)
        gemm::cpu_gemm(false, false, rows, s.D, cols, c.scale, dS, c.bk, hp.k + k0 * s.k.ld, s.k.ld,
                       1.0f, dQ + i0 * s.dq.ld, s.dq.ld);
      if (dK)
        gemm::cpu_gemm(true, false, cols, s.D, rows, c.scale, dS, c.bk, hp.q + i0 * s.q.ld, s.q.ld,
                       1.0f, dK + k0 * s.dk.ld, s.dk.ld);
    }
  }
}

/// f(n, scratch) for every head n < N, the heads split across tapegrad's threads, each part
/// with a scratch buffer of `floats` floats of its own.
template <class F>
void for_each_head(int64_t N, int64_t floats, F&& f) {
  const int parts = static_cast<int>(std::min<int64_t>(N, pool_threads()));
  std::vector<Array> scratch;  // allocated here: f must not throw
  for (int p = 0; p < std::max(parts, 1); ++p)
    scratch.push_back(Array::from_shape({static_cast<size_t>(floats)}));
  if (parts <= 1) {
    for (int64_t n = 0; n < N; ++n) f(n, scratch[0].data());
    return;
  }
  parallel_for(parts, [&](int p) {
    for (int64_t n = N * p / parts; n < N * (p + 1) / parts; ++n)
      f(n, scratch[static_cast<size_t>(p)].data());
  });
}

thread_local bool t_reference_only = false;  // a ReferenceAttentionScope is alive

}  // namespace

// The fused causal kernel: the recurrence above. Saves q, k, v, O and L (N·Tq floats).
Tensor causal_attention(const AttentionShape& s, const Tensor& q, const Tensor& k,
                        const Tensor& v, const AttnMask& mask) {
  const int64_t N = s.B * s.H;
  CausalPlan c;
  c.s = s;
  c.scale = 1.0f / std::sqrt(static_cast<float>(s.D));
  c.bq = g_tile_q.load(std::memory_order_relaxed);
  c.bk = g_tile_k.load(std::memory_order_relaxed);
  if (mask.defined()) {
    Shape full = s.lead;
    full.push_back(s.Tq);
    full.push_back(s.Tk);
    c.mi = index_mask(mask.values.shape(), full, s.op);
    c.boolean = mask.is_boolean();
  }
  c.q = q.impl()->ptr();
  c.k = k.impl()->ptr();
  c.v = v.impl()->ptr();
  c.mask = mask.defined() ? mask.values.impl()->ptr() : nullptr;

  auto out = make_storage(Array::from_shape(to_xshape(s.out_shape)));
  auto lse = std::make_shared<Array>(Array::from_shape({static_cast<size_t>(N * s.Tq)}));
  float* po = out->data.data();
  float* pl = lse->data();
  for_each_head(N, c.bq * c.bk + 2 * c.bq, [&](int64_t n, float* scratch) {
    causal_forward_head(c, n, po, pl + n * s.Tq, scratch);
  });

  const Saved sq = Saved::strided(q), sk = Saved::strided(k), sv = Saved::strided(v),
              so(out), sm = mask.defined() ? Saved::strided(mask.values) : Saved();
  const Shape q_shape = q.shape(), k_shape = k.shape(), v_shape = v.shape();
  return record(s.op, out, {q, k, v},
                [c, sq, sk, sv, so, sm, lse, q_shape, k_shape, v_shape](BackwardContext& ctx) {
                  CausalPlan plan = c;  // the operands, checked for in-place changes since
                  plan.q = ctx.read_data(sq);
                  plan.k = ctx.read_data(sk);
                  plan.v = ctx.read_data(sv);
                  plan.mask = sm.defined() ? ctx.read_data(sm) : nullptr;
                  const AttentionShape& s = plan.s;
                  auto zeros_if = [](bool need, const Shape& shape) {
                    Array a;
                    if (need) {
                      a = Array::from_shape(to_xshape(shape));
                      std::fill(a.begin(), a.end(), 0.0f);
                    }
                    return a;
                  };
                  // Packed: dq, dk and dv side by side in dq's array (q_shape is the packed shape).
                  Array dq = zeros_if(ctx.needs(0), q_shape),
                        dk = zeros_if(ctx.needs(1) && !s.packed, k_shape),
                        dv = zeros_if(ctx.needs(2) && !s.packed, v_shape);
                  const HeadGrads dg{ctx.needs(0) ? dq.data() : nullptr,
                                     !ctx.needs(1) ? nullptr : s.packed ? dq.data() : dk.data(),
                                     !ctx.needs(2) ? nullptr : s.packed ? dq.data() : dv.data()};
                  const float* g = ctx.grad.data();
                  const float* o = ctx.read_data(so);
                  const float* pl = lse->data();
                  for_each_head(s.B * s.H, 2 * plan.bq * plan.bk + s.Tq, [&](int64_t n, float* scratch) {
                    causal_backward_head(plan, n, g, o, pl + n * s.Tq, dg, scratch);
                  });
                  if (ctx.needs(0)) ctx.give(0, std::move(dq));
                  if (s.packed) return;
                  if (ctx.needs(1)) ctx.give(1, std::move(dk));
                  if (ctx.needs(2)) ctx.give(2, std::move(dv));
                });
}

AttentionTiles attention_tiles() { return {g_tile_q.load(), g_tile_k.load(), g_min_keys.load()}; }

void set_attention_tiles(AttentionTiles tiles) {
  if (tiles.q < 1 || tiles.k < 1 || tiles.min_keys < 1)
    throw ValueError("set_attention_tiles: tile sizes and min_keys must be >= 1, got " +
                     std::to_string(tiles.q) + " × " + std::to_string(tiles.k) + ", min_keys " +
                     std::to_string(tiles.min_keys));
  g_tile_q = tiles.q;
  g_tile_k = tiles.k;
  g_min_keys = tiles.min_keys;
}

ReferenceAttentionScope::ReferenceAttentionScope() : previous_(t_reference_only) {
  t_reference_only = true;
}
ReferenceAttentionScope::~ReferenceAttentionScope() { t_reference_only = previous_; }

// The dispatcher: the fused causal kernel where it applies, the reference kernel elsewhere
// (and on the GPU, whose products want the whole score matrix at once).
Tensor attention(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                 const AttnMask& mask_arg, bool is_causal, float dropout_p, bool training,
                 Tensor* weights) {
  AttnMask mask = mask_arg;  // the kernels read the mask's values as one row-major block
  if (mask.defined() && mask.is_boolean() && !mask.values.is_floating_point())
    mask.values = mask.values.to(kFloat32);  // a bool mask: true (1) = masked out
  if (mask.defined() && !mask.values.is_contiguous()) mask.values = mask.values.contiguous();
  if (!(dropout_p >= 0.0f && dropout_p <= 1.0f))
    throw ValueError(std::string(s.op) + ": dropout_p must be in [0, 1], got " +
                     std::to_string(dropout_p));
  const bool dropping = training && dropout_p > 0.0f;
  const bool mask_grad = mask.defined() && !mask.is_boolean() && mask.values.requires_grad();
  if (is_causal && !dropping && !weights && !mask_grad && !t_reference_only &&
      s.Tk >= g_min_keys.load(std::memory_order_relaxed) && current_device() == Device::CPU)
    return causal_attention(s, q, k, v, mask);
  return reference_attention(s, q, k, v, mask, is_causal, dropout_p, training, weights);
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
