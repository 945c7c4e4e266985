// Products: matmul (torch.matmul semantics) and linear (y = x Wᵀ + b). Every product is a
// call to gemm::gemm with transpose flags; no operand is ever transposed by copying, and a
// transposed view is read where it lies.
#include <xtensor/xbuilder.hpp>

#include "backend/gemm.h"
#include "backend/parallel.h"
#include "backend/vec.h"
#include "ops/common.h"
#include "ops/linear_act.h"

namespace tg {
using namespace detail;

namespace {

// Offsets (in elements) of each batch's matrix inside a dense buffer of an operand whose
// batch dims `batch` broadcast to `out_batch`; broadcast dims repeat the same matrix.
std::vector<int64_t> batch_offsets(const Shape& batch, const Shape& out_batch, int64_t matrix) {
  return strided_offsets(out_batch, broadcast_strides(batch, out_batch, matrix));
}

/// One matmul operand where it lies: its matrices' layout (a transposed view is read by the
/// GEMM's flag), and where each of the output's batch matrices finds its own.
struct GemmOperand {
  MatrixLayout m;
  std::vector<int64_t> at;  // storage offsets from element 0, per output batch
};

/// `shape` is the operand's, promoted to a matrix (a 1-D one: `row` says how); `strides` the
/// same promotion of its strides.
GemmOperand gemm_operand(const Shape& shape, const Strides& strides, const Shape& out_batch) {
  const size_t r = shape.size();
  GemmOperand op;
  op.m = matrix_layout(shape[r - 2], shape[r - 1], strides[r - 2], strides[r - 1]);
  const size_t lead = out_batch.size() - (r - 2);
  std::vector<int64_t> bs(out_batch.size(), 0);  // 0 where the operand broadcasts
  for (size_t i = 0; i + 2 < r; ++i) bs[lead + i] = shape[i] == 1 ? 0 : strides[i];
  op.at = strided_offsets(out_batch, bs);
  return op;
}

/// The operand's strides promoted like its shape: (K) -> (1, K) on the left, (K, 1) on the right.
Strides promoted_strides(const TensorImpl& t, bool left) {
  if (t.shape().size() != 1) return t.strides();
  const int64_t s = t.strides()[0], k = static_cast<int64_t>(t.shape()[0]);
  return left ? Strides{k * s, s} : Strides{s, 1};
}

/// Whether the GEMM can read every matrix of `t` where it lies.
bool gemm_readable(const Tensor& t, bool left) {
  const TensorImpl& x = *t.impl();
  if (x.contiguous() || x.shape().empty()) return true;
  const Strides st = promoted_strides(x, left);
  const size_t r = st.size();
  const int64_t rows = x.shape().size() == 1 ? (left ? 1 : static_cast<int64_t>(x.shape()[0]))
                                           : static_cast<int64_t>(x.shape()[r - 2]);
  const int64_t cols = x.shape().size() == 1 ? (left ? static_cast<int64_t>(x.shape()[0]) : 1)
                                           : static_cast<int64_t>(x.shape()[r - 1]);
  return matrix_layout(rows, cols, st[r - 2], st[r - 1]).ok;
}

/// The operand itself when the GEMM can read it, else its contiguous copy (kept in `copy`).
const Tensor& gemm_input(const Tensor& t, Tensor& copy, bool left) {
  if (!t.defined() || gemm_readable(t, left)) return t;
  copy = t.contiguous();
  return copy;
}

}  // namespace

// C = A·B                 dA = G·Bᵀ, dB = Aᵀ·G   (summed over broadcast batch dims)
// Transposed views (x.t(), x.transpose(-2, -1)) are read in place through the GEMM's flags.
Tensor matmul(const Tensor& a_arg, const Tensor& b_arg) {
  if (!a_arg.defined() || !b_arg.defined()) throw ValueError("matmul: undefined tensor");
  Tensor a_copy, b_copy;
  const Tensor& a = gemm_input(a_arg, a_copy, true);
  const Tensor& b = gemm_input(b_arg, b_copy, false);
  const Shape as = a.shape(), bs = b.shape();
  if (as.empty() || bs.empty())
    shape_error("matmul", "both arguments need at least 1 dimension, got " + to_string(as) +
                              " and " + to_string(bs));
  // Promote 1-D operands to matrices: (K) -> (1, K) on the left, (K) -> (K, 1) on the right.
  const Shape ap = as.size() == 1 ? Shape{1, as[0]} : as;
  const Shape bp = bs.size() == 1 ? Shape{bs[0], 1} : bs;
  const int64_t M = ap[ap.size() - 2], K = ap.back(), N = bp.back();
  if (bp[bp.size() - 2] != K)
    shape_error("matmul", "shapes " + to_string(as) + " and " + to_string(bs) +
                              " cannot be multiplied (" + std::to_string(K) + " vs " +
                              std::to_string(bp[bp.size() - 2]) + ")");
  const Shape a_batch(ap.begin(), ap.end() - 2), b_batch(bp.begin(), bp.end() - 2);
  Shape out_batch;
  try {
    out_batch = broadcast_shapes(a_batch, b_batch, "matmul");
  } catch (const ShapeError& e) {  // name the operands, not only their batch dims
    shape_error("matmul", "the batch dims of " + to_string(as) + " and " + to_string(bs) +
                              " do not broadcast (" + e.what() + ")");
  }
  Shape out_shape = out_batch;
  if (as.size() > 1) out_shape.push_back(M);
  if (bs.size() > 1) out_shape.push_back(N);

  const GemmOperand oa = gemm_operand(ap, promoted_strides(*a.impl(), true), out_batch);
  const GemmOperand ob = gemm_operand(bp, promoted_strides(*b.impl(), false), out_batch);
  const int64_t batch = static_cast<int64_t>(oa.at.size());
  Array c = Array::from_shape(to_xshape(out_shape));
  const float *pa = a.impl()->ptr(), *pb = b.impl()->ptr();
  const gemm::OperandId ia = operand_id(*a.impl()), ib = operand_id(*b.impl());
  for (int64_t i = 0; i < batch; ++i)
    gemm::gemm(oa.m.trans, ob.m.trans, M, N, K, 1.0f, pa + oa.at[i], oa.m.ld, pb + ob.at[i],
               ob.m.ld, 0.0f, c.data() + i * M * N, N, ia, ib);

  const bool rec = will_record(a, b);  // each saves what the other's gradient reads
  const Saved sa = rec && b.requires_grad() ? Saved::strided(a) : Saved();
  const Saved sb = rec && a.requires_grad() ? Saved::strided(b) : Saved();
  const bool a_leaf = !a.impl()->grad_fn, b_leaf = !b.impl()->grad_fn;  // for the device cache
  return record("matmul", std::move(c), {a, b},
                [sa, sb, as, bs, a_batch, b_batch, out_batch, M, N, K, oa, ob, batch, a_leaf,
                 b_leaf](BackwardContext& ctx) {
                  const float* g = ctx.grad.data();
                  // Each gradient is summed over the batch into zeros, or straight into a
                  // leaf operand's .grad() where BackwardContext::leaf_grad allows.
                  if (ctx.needs(0)) {  // dA[batch i] += G · Bᵀ
                    const auto at = batch_offsets(a_batch, out_batch, M * K);
                    const float* pb = ctx.read_data(sb);
                    const gemm::OperandId ib = b_leaf ? operand_id(*sb.storage()) : gemm::OperandId{};
                    LeafGrad acc = ctx.leaf_grad(0, {sb.storage()});
                    Array ga = acc ? Array() : Array(xt::zeros<float>(to_xshape(as)));
                    float* da = acc ? acc.data() : ga.data();
                    for (int64_t i = 0; i < batch; ++i)
                      gemm::gemm(false, !ob.m.trans, M, K, N, 1.0f, g + i * M * N, N,
                                 pb + ob.at[i], ob.m.ld, 1.0f, da + at[i], K, {}, ib);
                    if (!acc) ctx.give(0, std::move(ga));
                  }
                  if (ctx.needs(1)) {  // dB[batch i] += Aᵀ · G
                    const auto at = batch_offsets(b_batch, out_batch, K * N);
                    const float* pa = ctx.read_data(sa);
                    const gemm::OperandId ia = a_leaf ? operand_id(*sa.storage()) : gemm::OperandId{};
                    LeafGrad acc = ctx.leaf_grad(1, {sa.storage()});
                    Array gb = acc ? Array() : Array(xt::zeros<float>(to_xshape(bs)));
                    float* db = acc ? acc.data() : gb.data();
                    for (int64_t i = 0; i < batch; ++i)
                      gemm::gemm(!oa.m.trans, false, K, N, M, 1.0f, pa + oa.at[i], oa.m.ld,
                                 g + i * M * N, N, 1.0f, db + at[i], N, ia);
                    if (!acc) ctx.give(1, std::move(gb));
                  }
                });
}

namespace {

/// linear's operands, checked: each read where it lies when the GEMM can (a transposed weight
/// by its flag), else through its contiguous copy.
struct LinearArgs {
  Tensor x, weight, bias;  // bias: undefined, or dense (out)
  Shape xs, ws;            // x (..., in), weight (out, in)
  int64_t rows = 0, in = 0, out = 0;
  MatrixLayout mx, mw;     // x seen as (rows, in), the weight as (out, in)
};

LinearArgs linear_args(const char* op, const Tensor& x_arg, const Tensor& weight_arg,
                       const Tensor& bias_arg) {
  if (!x_arg.defined() || !weight_arg.defined())
    throw ValueError(std::string(op) + ": undefined input or weight");
  LinearArgs a;
  a.x = as_matrix(*x_arg.impl()).ok ? x_arg : x_arg.contiguous();
  a.weight = as_matrix(*weight_arg.impl()).ok ? weight_arg : weight_arg.contiguous();
  Tensor bias_copy;
  a.bias = dense(bias_arg, bias_copy);
  a.xs = a.x.shape();
  a.ws = a.weight.shape();
  if (a.ws.size() != 2) shape_error(op, "weight must be 2-D (out, in), got " + to_string(a.ws));
  a.out = a.ws[0];
  a.in = a.ws[1];
  if (a.xs.empty() || a.xs.back() != a.in)
    shape_error(op, "input last dim " +
                        (a.xs.empty() ? std::string("(none)") : std::to_string(a.xs.back())) +
                        ", expected " + std::to_string(a.in) + " (weight " + to_string(a.ws) +
                        "), input shape " + to_string(a.xs));
  if (a.bias.defined() && a.bias.shape() != Shape{a.out})
    shape_error(op, "bias shape " + to_string(a.bias.shape()) + ", expected [" +
                        std::to_string(a.out) + "]");
  a.mx = as_matrix(*a.x.impl());
  a.mw = as_matrix(*a.weight.impl());
  a.rows = numel_of(Shape(a.xs.begin(), a.xs.end() - 1));
  return a;
}

/// y = x Wᵀ + b, (..., out). The bias is copied into every row and the GEMM adds x Wᵀ to it
/// (beta = 1). The alternative, beta = 0 and then a pass adding b, costs more: OpenBLAS
/// zeroes C for beta = 0, so it is two passes over y against one (callgrind, W1 and W3 shapes:
/// about 2.4M more instructions for a 1024x512 y).
Array linear_forward(const LinearArgs& a) {
  Shape ys = a.xs;
  ys.back() = a.out;
  Array y = Array::from_shape(to_xshape(ys));
  float beta = 0.0f;
  if (a.bias.defined()) {
    const float* pb = val(a.bias).data();
    float* py = y.data();
    const int64_t out = a.out;
    for_each_row(a.rows, out, kGrain, [=](int64_t r) {  // rows split across threads
      std::copy(pb, pb + out, py + r * out);
    });
    beta = 1.0f;
  }
  gemm::gemm(a.mx.trans, !a.mw.trans, a.rows, a.out, a.in, 1.0f, a.x.impl()->ptr(), a.mx.ld,
             a.weight.impl()->ptr(), a.mw.ld, beta, y.data(), a.out, operand_id(*a.x.impl()),
             operand_id(*a.weight.impl()));
  return y;
}

/// Input i's gradient (of `shape`) from f(dst, beta), a product writing dst = P + beta·dst:
/// straight into its leaf's .grad() with beta = 1 where BackwardContext::leaf_grad allows
/// (`reads`: the storage the product reads), else into a new buffer with beta = 0, given.
template <class F>
void write_grad(BackwardContext& ctx, size_t i, const Shape& shape, const Storage* reads, F&& f) {
  if (LeafGrad acc = ctx.leaf_grad(i, {reads})) {
    f(acc.data(), 1.0f);
    return;
  }
  Array grad = Array::from_shape(to_xshape(shape));
  f(grad.data(), 0.0f);
  ctx.give(i, std::move(grad));
}

/// linear's backward from dL/d(x Wᵀ + b), G (rows, out): what it saved, and the products.
/// dx and dW go straight into their leaf's .grad() where it exists (the GEMM with
/// beta = 1; BackwardContext::leaf_grad says when), else computed and given.
struct LinearBackward {
  Saved sx, sw;  // x for dW, the weight for dx (each only if the other needs a gradient)
  Shape xs, ws;
  int64_t rows = 0, in = 0, out = 0;
  MatrixLayout mx, mw;
  bool x_leaf = false, w_leaf = false;  // for the device cache

  LinearBackward(const LinearArgs& a, bool rec)
      : sx(rec && a.weight.requires_grad() ? Saved::strided(a.x) : Saved()),
        sw(rec && a.x.requires_grad() ? Saved::strided(a.weight) : Saved()),
        xs(a.xs), ws(a.ws), rows(a.rows), in(a.in), out(a.out), mx(a.mx), mw(a.mw),
        x_leaf(!a.x.impl()->grad_fn), w_leaf(!a.weight.impl()->grad_fn) {}

  void operator()(BackwardContext& ctx, const float* g) const {
    if (ctx.needs(0)) {  // dx = G W
      const float* pw = ctx.read_data(sw);
      const gemm::OperandId iw = w_leaf ? operand_id(*sw.storage()) : gemm::OperandId{};
      write_grad(ctx, 0, xs, sw.storage(), [&](float* dst, float beta) {
        gemm::gemm(false, mw.trans, rows, in, out, 1.0f, g, out, pw, mw.ld, beta, dst, in, {}, iw);
      });
    }
    if (ctx.needs(1)) {  // dW = Gᵀ x
      const float* px = ctx.read_data(sx);
      const gemm::OperandId ix = x_leaf ? operand_id(*sx.storage()) : gemm::OperandId{};
      write_grad(ctx, 1, ws, sx.storage(), [&](float* dst, float beta) {
        gemm::gemm(true, mx.trans, out, in, rows, 1.0f, g, out, px, mx.ld, beta, dst, in, {}, ix);
      });
    }
    if (ctx.needs(2)) {  // db = Σ_r G[r], row after row (the vector kernels)
      // Summed apart and then added, even into an existing .grad(): adding the rows into it
      // one by one would round differently from the old path (a + Σ against Σ(a + ...)) for
      // no gain (db is one row). The columns split across threads: each column still sums
      // its rows in order, so every thread count gives the same bits.
      const vec::Kernels& k = vec::kernels();
      Array gb = Array::from_shape({static_cast<size_t>(out)});
      std::fill(gb.begin(), gb.end(), 0.0f);
      float* pb = gb.data();
      const int64_t o = out, R = rows;
      for_range(o, kGrain / std::max<int64_t>(R, 1) + 1, [&k, pb, g, o, R](int64_t c0, int64_t c1) {
        const auto n = static_cast<size_t>(c1 - c0);
        for (int64_t r = 0; r < R; ++r)
          k.binary(vec::Binary::Add, pb + c0, n, g + r * o + c0, n, pb + c0, n);
      });
      ctx.give(2, std::move(gb));
    }
  }
};

}  // namespace

// y = x Wᵀ + b, x seen as (M, in)      dx = G W,  dW = Gᵀ x,  db = Σ_rows G
Tensor linear(const Tensor& x_arg, const Tensor& weight_arg, const Tensor& bias_arg) {
  const LinearArgs a = linear_args("linear", x_arg, weight_arg, bias_arg);
  Array y = linear_forward(a);
  const LinearBackward back(a, will_record(a.x, a.weight, a.bias));
  return record("linear", std::move(y), {a.x, a.weight, a.bias},
                [back](BackwardContext& ctx) { back(ctx, ctx.grad.data()); });
}

namespace detail {

// relu: y = max(z, 0), z = x Wᵀ + b     dz = g [y > 0], then linear's dx, dW, db from dz
// gelu: y = z Φ(z) (exact)              dz = g (Φ(z) + z φ(z))
Tensor linear_act(const Tensor& x_arg, const Tensor& weight_arg, const Tensor& bias_arg,
                  Activation act) {
  if (act == Activation::None) return linear(x_arg, weight_arg, bias_arg);
  const char* name = act == Activation::Relu ? "linear_relu" : "linear_gelu";
  const LinearArgs a = linear_args(name, x_arg, weight_arg, bias_arg);
  Array y = linear_forward(a);  // z, then act(z) in the same buffer: one pass after the GEMM
  const bool rec = will_record(a.x, a.weight, a.bias);
  const LinearBackward back(a, rec);
  const size_t n = y.size();
  if (act == Activation::Gelu) {  // the kernel tg::gelu runs, so the same values
    // As tg::gelu, the derivative is saved rather than z: the kernel has it at hand.
    auto dydx = rec ? std::make_shared<Array>(Array::from_shape(y.shape())) : nullptr;
    vec::kernels().gelu(y.data(), y.data(), dydx ? dydx->data() : nullptr, n);
    if (!rec) return record(name, std::move(y), {a.x, a.weight, a.bias}, nullptr);
    return record(name, std::move(y), {a.x, a.weight, a.bias},
                  [back, dydx](BackwardContext& ctx) {
                    Array g = ctx.take_grad();  // dz, computed in g's buffer
                    vec::kernels().binary(vec::Binary::Mul, g.data(), g.size(), dydx->data(),
                                          dydx->size(), g.data(), g.size());
                    back(ctx, g.data());
                  });
  }
  // where(z < 0, 0, z), as tg::relu: NaN stays NaN (max would give 0).
  float* p = y.data();
  for_range(static_cast<int64_t>(n), kGrain, [p](int64_t b, int64_t e) {  // across threads
    for (int64_t i = b; i < e; ++i) p[i] = p[i] < 0.0f ? 0.0f : p[i];
  });
  auto ys = make_storage(std::move(y));
  return record(name, ys, {a.x, a.weight, a.bias}, [back, sy = Saved(ys)](BackwardContext& ctx) {
    const float* y = ctx.read(sy).data();
    Array g = ctx.take_grad();  // dz, computed in g's buffer
    float* pg = g.data();
    for_range(static_cast<int64_t>(g.size()), kGrain, [pg, y](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) pg[i] = y[i] > 0.0f ? pg[i] : 0.0f;
    });
    back(ctx, g.data());
  });
}

}  // namespace detail
}  // namespace tg
