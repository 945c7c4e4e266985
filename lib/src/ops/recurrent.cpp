// The fused recurrences behind nn::RNN, LSTM and GRU (and one step of LSTMCell, GRUCell):
// each is one tape node for a whole sequence, whose backward is backpropagation through time
// written by hand (one small GEMM per step each way, and the weight gradient as one GEMM over
// all steps). The equations are in ops/recurrent.h.
//
// Legend: T = time steps, B = batch, H = hidden size, G = gate rows (H, 4H or 3H).
#include "ops/recurrent.h"

#include <algorithm>
#include <cmath>

#include "backend/gemm.h"
#include "backend/vec.h"
#include "ops/common.h"

namespace tg {
namespace detail {

namespace {

// ---- elementwise kernels on contiguous runs, in place (backend/vec.h) ------------------------
void sigmoid_(float* p, size_t n) { vec::kernels().sigmoid(p, p, n); }

void tanh_(float* p, size_t n) { vec::kernels().tanh(p, p, n); }

void relu_(float* p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = std::max(p[i], 0.0f);
}

/// rows (N, G) += bias (G) on every row; nothing if bias is null.
void add_rows(float* rows, const float* bias, int64_t N, int64_t G) {
  if (!bias) return;
  for (int64_t r = 0; r < N; ++r)
    for (int64_t j = 0; j < G; ++j) rows[r * G + j] += bias[j];
}

// The inputs of every recurrence op, in this order.
enum Input : size_t { kXp = 0, kH0 = 1, kC0 = 2, kWhh = 3, kBhh = 4 };

/// What every kind's backward ends with. dgh (T, B, G) is the gradient of the recurrent
/// pre-activations W_hh h_{t-1} + b_hh; hs (T, B, H) the hidden states (h_{t-1} = hs[t-1]).
///   dW_hh = Σ_t dgh_tᵀ h_{t-1}   (one GEMM over t >= 1, one for h0)     db_hh = Σ_{t,b} dgh
void give_recurrent(BackwardContext& ctx, const float* dgh, const View& h0, const float* hs,
                    int64_t T, int64_t B, int64_t G, int64_t H) {
  if (ctx.needs(kWhh)) {
    Array dw = Array::from_shape({static_cast<size_t>(G), static_cast<size_t>(H)});
    gemm::gemm(true, false, G, H, B, 1.0f, dgh, G, h0.data(), H, 0.0f, dw.data(), H);
    if (T > 1)
      gemm::gemm(true, false, G, H, (T - 1) * B, 1.0f, dgh + B * G, G, hs, H, 1.0f, dw.data(), H);
    ctx.give(kWhh, std::move(dw));
  }
  if (ctx.needs(kBhh)) {
    Array db = xt::zeros<float>({static_cast<size_t>(G)});
    for (int64_t r = 0; r < T * B; ++r)
      for (int64_t j = 0; j < G; ++j) db.data()[j] += dgh[r * G + j];
    ctx.give(kBhh, std::move(db));
  }
}

/// A gradient buffer shaped like `like` (the caller's h0 may be (B, H) or (1, B, H)).
Array shaped_like(const View& like, const std::vector<float>& values) {
  Array a = Array::from_shape(like.shape());
  std::copy(values.begin(), values.end(), a.data());
  return a;
}

}  // namespace

// ---- the recurrences ---------------------------------------------------------------------
// Each takes xp (T, B, G) = x W_ihᵀ + b_ih for every step, h0 (and c0) holding B·H values,
// w_hh (G, H) and b_hh (G) or undefined.

// Elman:  h_t = act(a_t),  a_t = xp_t + h_{t-1} W_hhᵀ + b_hh        -> hs (T, B, H)
//         da_t = (dh_t + da_{t+1} W_hh) * act'(a_t)   [tanh' = 1 - h², relu' = h > 0]
Tensor elman_recurrence(bool relu, const Tensor& xp_arg, const Tensor& h0_arg, const Tensor& w_hh_arg, const Tensor& b_hh_arg) {
  Tensor xp_copy;
  const Tensor& xp = dense(xp_arg, xp_copy);
  Tensor h0_copy;
  const Tensor& h0 = dense(h0_arg, h0_copy);
  Tensor w_hh_copy;
  const Tensor& w_hh = dense(w_hh_arg, w_hh_copy);
  Tensor b_hh_copy;
  const Tensor& b_hh = dense(b_hh_arg, b_hh_copy);
  const int64_t T = xp.size(0), B = xp.size(1), H = w_hh.size(1), BH = B * H;
  auto hs = make_storage(Array::from_shape(val(xp).shape()));
  const float* w = val(w_hh).data();
  const gemm::OperandId wid = operand_id(*w_hh.impl());  // h2h: the same weight every step
  const bool w_leaf = !w_hh.impl()->grad_fn;
  const float* bias = b_hh.defined() ? val(b_hh).data() : nullptr;
  const float* hprev = val(h0).data();
  for (int64_t t = 0; t < T; ++t) {
    float* a = hs->data.data() + t * BH;
    std::copy(val(xp).data() + t * BH, val(xp).data() + (t + 1) * BH, a);
    add_rows(a, bias, B, H);
    gemm::gemm(false, true, B, H, H, 1.0f, hprev, H, w, H, 1.0f, a, H, {}, wid);
    relu ? relu_(a, BH) : tanh_(a, BH);
    hprev = a;
  }
  const Saved sh0(h0), sw(w_hh);
  return record(relu ? "rnn_relu" : "rnn_tanh", hs, {xp, h0, Tensor(), w_hh, b_hh},
                [sy = Saved(hs), sh0, sw, relu, T, B, H, BH, w_leaf](BackwardContext& ctx) {
    const gemm::OperandId wid = w_leaf ? operand_id(*sw.storage()) : gemm::OperandId{};
    const View& ys = ctx.read(sy);
    const float* dy = ctx.grad.data();
    const float* y = ys.data();
    Array da = Array::from_shape(ys.shape());  // dL/da, also dL/dxp
    std::vector<float> dh(BH, 0.0f);           // dL/dh_{t} through h_{t+1}
    for (int64_t t = T - 1; t >= 0; --t) {
      float* d = da.data() + t * BH;
      const float* yt = y + t * BH;
      const float* gt = dy + t * BH;
      for (int64_t i = 0; i < BH; ++i) {
        const float g = gt[i] + dh[i];
        d[i] = relu ? (yt[i] > 0.0f ? g : 0.0f) : g * (1.0f - yt[i] * yt[i]);
      }
      gemm::gemm(false, false, B, H, H, 1.0f, d, H, ctx.read(sw).data(), H, 0.0f, dh.data(), H,
                 {}, wid);
    }
    give_recurrent(ctx, da.data(), ctx.read(sh0), y, T, B, H, H);
    if (ctx.needs(kH0)) ctx.give(kH0, shaped_like(ctx.read(sh0), dh));
    ctx.give(kXp, std::move(da));
  });
}

// LSTM:  a_t = xp_t + h_{t-1} W_hhᵀ + b_hh = [a_i, a_f, a_g, a_o]
//        i, f, o = σ(a_i, a_f, a_o),  g = tanh(a_g),  c_t = f c_{t-1} + i g,  h_t = o tanh(c_t)
//        -> (T + 1, B, H): h_0..h_{T-1}, then c_{T-1}
// With dh = dL/dh_t and dc = dL/dc_t (from c_{t+1} and from h_t):
//        dc = dc_next + dh o (1 - tanh²c),  da_i = dc g i(1-i),  da_f = dc c_{t-1} f(1-f),
//        da_g = dc i (1-g²),  da_o = dh tanh(c) o(1-o),  dc_{t-1} = dc f,  dh_{t-1} = da W_hh
Tensor lstm_recurrence(const Tensor& xp_arg, const Tensor& h0_arg, const Tensor& c0_arg, const Tensor& w_hh_arg,
            const Tensor& b_hh_arg) {
  Tensor xp_copy;
  const Tensor& xp = dense(xp_arg, xp_copy);
  Tensor h0_copy;
  const Tensor& h0 = dense(h0_arg, h0_copy);
  Tensor c0_copy;
  const Tensor& c0 = dense(c0_arg, c0_copy);
  Tensor w_hh_copy;
  const Tensor& w_hh = dense(w_hh_arg, w_hh_copy);
  Tensor b_hh_copy;
  const Tensor& b_hh = dense(b_hh_arg, b_hh_copy);
  const int64_t T = xp.size(0), B = xp.size(1), G = xp.size(2), H = w_hh.size(1), BH = B * H;
  const auto sT = static_cast<size_t>(T), sB = static_cast<size_t>(B), sH = static_cast<size_t>(H);
  auto acts = std::make_shared<Array>(Array::from_shape(val(xp).shape()));  // i, f, g, o
  auto cs = std::make_shared<Array>(Array::from_shape({sT, sB, sH}));       // c_t
  auto tcs = std::make_shared<Array>(Array::from_shape({sT, sB, sH}));      // tanh(c_t)
  auto out = make_storage(Array::from_shape({sT + 1, sB, sH}));
  const float* w = val(w_hh).data();
  const gemm::OperandId wid = operand_id(*w_hh.impl());  // h2h: the same weight every step
  const bool w_leaf = !w_hh.impl()->grad_fn;
  const float* bias = b_hh.defined() ? val(b_hh).data() : nullptr;
  const float* hprev = val(h0).data();
  const float* cprev = val(c0).data();
  for (int64_t t = 0; t < T; ++t) {
    float* a = acts->data() + t * B * G;
    std::copy(val(xp).data() + t * B * G, val(xp).data() + (t + 1) * B * G, a);
    add_rows(a, bias, B, G);
    gemm::gemm(false, true, B, G, H, 1.0f, hprev, H, w, H, 1.0f, a, G, {}, wid);
    float* c = cs->data() + t * BH;
    float* tc = tcs->data() + t * BH;
    float* h = out->data.data() + t * BH;
    for (int64_t b = 0; b < B; ++b) {
      float* ab = a + b * G;
      sigmoid_(ab, 2 * sH);
      tanh_(ab + 2 * H, sH);
      sigmoid_(ab + 3 * H, sH);
      for (int64_t j = 0; j < H; ++j)
        c[b * H + j] = ab[H + j] * cprev[b * H + j] + ab[j] * ab[2 * H + j];
    }
    std::copy(c, c + BH, tc);
    tanh_(tc, sB * sH);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) h[b * H + j] = a[b * G + 3 * H + j] * tc[b * H + j];
    hprev = h;
    cprev = c;
  }
  std::copy(cprev, cprev + BH, out->data.data() + T * BH);
  const Saved sh0(h0), sc0(c0), sw(w_hh);
  return record("lstm", out, {xp, h0, c0, w_hh, b_hh},
                [sy = Saved(out), acts, cs, tcs, sh0, sc0, sw, T, B, G, H, BH, w_leaf](BackwardContext& ctx) {
    const gemm::OperandId wid = w_leaf ? operand_id(*sw.storage()) : gemm::OperandId{};
    const View& ys = ctx.read(sy);
    const float* dy = ctx.grad.data();
    Array da = Array::from_shape(acts->shape());
    std::vector<float> dh(BH, 0.0f);
    std::vector<float> dc(dy + T * BH, dy + (T + 1) * BH);  // dL/dc_{T-1} from the c_n output
    for (int64_t t = T - 1; t >= 0; --t) {
      const float* a = acts->data() + t * B * G;
      const float* tc = tcs->data() + t * BH;
      const float* cp = t > 0 ? cs->data() + (t - 1) * BH : ctx.read(sc0).data();
      float* d = da.data() + t * B * G;
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t j = 0; j < H; ++j) {
          const int64_t k = b * H + j;
          const float* ab = a + b * G;
          const float i = ab[j], f = ab[H + j], g = ab[2 * H + j], o = ab[3 * H + j];
          const float dht = dy[t * BH + k] + dh[k];
          const float dct = dc[k] + dht * o * (1.0f - tc[k] * tc[k]);
          float* db = d + b * G;
          db[j] = dct * g * i * (1.0f - i);
          db[H + j] = dct * cp[k] * f * (1.0f - f);
          db[2 * H + j] = dct * i * (1.0f - g * g);
          db[3 * H + j] = dht * tc[k] * o * (1.0f - o);
          dc[k] = dct * f;
        }
      }
      gemm::gemm(false, false, B, H, G, 1.0f, d, G, ctx.read(sw).data(), H, 0.0f, dh.data(), H,
                 {}, wid);
    }
    give_recurrent(ctx, da.data(), ctx.read(sh0), ys.data(), T, B, G, H);
    if (ctx.needs(kH0)) ctx.give(kH0, shaped_like(ctx.read(sh0), dh));
    if (ctx.needs(kC0)) ctx.give(kC0, shaped_like(ctx.read(sc0), dc));
    ctx.give(kXp, std::move(da));
  });
}

// GRU:   gh_t = h_{t-1} W_hhᵀ + b_hh = [gh_r, gh_z, gh_n],  xp_t = [x_r, x_z, x_n]
//        r = σ(x_r + gh_r),  z = σ(x_z + gh_z),  n = tanh(x_n + r gh_n),  h_t = n + z (h_{t-1} - n)
//        -> hs (T, B, H)
// With dh = dL/dh_t:  dz = dh (h_{t-1} - n),  dn = dh (1 - z),  dp_n = dn (1 - n²),
//        dx_n = dp_n,  dgh_n = dp_n r,  d(r, z) pre-activations = dp_n gh_n r(1-r), dz z(1-z)
//        (shared by dx and dgh),  dh_{t-1} = dh z + dgh W_hh
Tensor gru_recurrence(const Tensor& xp_arg, const Tensor& h0_arg, const Tensor& w_hh_arg, const Tensor& b_hh_arg) {
  Tensor xp_copy;
  const Tensor& xp = dense(xp_arg, xp_copy);
  Tensor h0_copy;
  const Tensor& h0 = dense(h0_arg, h0_copy);
  Tensor w_hh_copy;
  const Tensor& w_hh = dense(w_hh_arg, w_hh_copy);
  Tensor b_hh_copy;
  const Tensor& b_hh = dense(b_hh_arg, b_hh_copy);
  const int64_t T = xp.size(0), B = xp.size(1), G = xp.size(2), H = w_hh.size(1), BH = B * H;
  const auto sT = static_cast<size_t>(T), sB = static_cast<size_t>(B), sH = static_cast<size_t>(H);
  auto acts = std::make_shared<Array>(Array::from_shape(val(xp).shape()));  // r, z, n
  auto ghn = std::make_shared<Array>(Array::from_shape({sT, sB, sH}));      // gh_n
  auto hs = make_storage(Array::from_shape({sT, sB, sH}));
  std::vector<float> gh(static_cast<size_t>(B * G));
  const float* w = val(w_hh).data();
  const gemm::OperandId wid = operand_id(*w_hh.impl());  // h2h: the same weight every step
  const bool w_leaf = !w_hh.impl()->grad_fn;
  const float* bias = b_hh.defined() ? val(b_hh).data() : nullptr;
  const float* hprev = val(h0).data();
  for (int64_t t = 0; t < T; ++t) {
    if (bias) {
      for (int64_t b = 0; b < B; ++b) std::copy(bias, bias + G, gh.data() + b * G);
    }
    gemm::gemm(false, true, B, G, H, 1.0f, hprev, H, w, H, bias ? 1.0f : 0.0f, gh.data(), G, {},
               wid);
    const float* x = val(xp).data() + t * B * G;
    float* a = acts->data() + t * B * G;
    float* gn = ghn->data() + t * BH;
    float* h = hs->data.data() + t * BH;
    for (int64_t b = 0; b < B; ++b) {
      float* ab = a + b * G;
      const float* xb = x + b * G;
      const float* gb = gh.data() + b * G;
      for (int64_t j = 0; j < 2 * H; ++j) ab[j] = xb[j] + gb[j];
      sigmoid_(ab, 2 * sH);
      for (int64_t j = 0; j < H; ++j) {
        gn[b * H + j] = gb[2 * H + j];
        ab[2 * H + j] = xb[2 * H + j] + ab[j] * gb[2 * H + j];
      }
      tanh_(ab + 2 * H, sH);
      for (int64_t j = 0; j < H; ++j) {
        const float n = ab[2 * H + j], z = ab[H + j];
        h[b * H + j] = n + z * (hprev[b * H + j] - n);
      }
    }
    hprev = h;
  }
  const Saved sh0(h0), sw(w_hh);
  return record("gru", hs, {xp, h0, Tensor(), w_hh, b_hh},
                [sy = Saved(hs), acts, ghn, sh0, sw, T, B, G, H, BH, w_leaf](BackwardContext& ctx) {
    const gemm::OperandId wid = w_leaf ? operand_id(*sw.storage()) : gemm::OperandId{};
    const View& ys = ctx.read(sy);
    const float* dy = ctx.grad.data();
    Array dx = Array::from_shape(acts->shape());
    std::vector<float> dgh(static_cast<size_t>(T * B * G));
    std::vector<float> dh(BH, 0.0f);
    for (int64_t t = T - 1; t >= 0; --t) {
      const float* a = acts->data() + t * B * G;
      const float* gn = ghn->data() + t * BH;
      const float* hp = t > 0 ? ys.data() + (t - 1) * BH : ctx.read(sh0).data();
      float* dxt = dx.data() + t * B * G;
      float* dgt = dgh.data() + t * B * G;
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t j = 0; j < H; ++j) {
          const int64_t k = b * H + j;
          const float* ab = a + b * G;
          const float r = ab[j], z = ab[H + j], n = ab[2 * H + j];
          const float dht = dy[t * BH + k] + dh[k];
          const float dpn = dht * (1.0f - z) * (1.0f - n * n);
          const float dpr = dpn * gn[k] * r * (1.0f - r);
          const float dpz = dht * (hp[k] - n) * z * (1.0f - z);
          float* dxb = dxt + b * G;
          float* dgb = dgt + b * G;
          dxb[j] = dgb[j] = dpr;
          dxb[H + j] = dgb[H + j] = dpz;
          dxb[2 * H + j] = dpn;
          dgb[2 * H + j] = dpn * r;
          dh[k] = dht * z;
        }
      }
      gemm::gemm(false, false, B, H, G, 1.0f, dgt, G, ctx.read(sw).data(), H, 1.0f, dh.data(), H,
                 {}, wid);
    }
    give_recurrent(ctx, dgh.data(), ctx.read(sh0), ys.data(), T, B, G, H);
    if (ctx.needs(kH0)) ctx.give(kH0, shaped_like(ctx.read(sh0), dh));
    ctx.give(kXp, std::move(dx));
  });
}

}  // namespace detail
}  // namespace tg
