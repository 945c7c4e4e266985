// Products: matmul (torch.matmul semantics) and linear (y = x Wᵀ + b). Every product is a
// call to gemm::gemm with transpose flags; no operand is ever transposed by copying, and a
// transposed view is read where it lies.
#include <xtensor/xbuilder.hpp>

#include "backend/gemm.h"
#include "backend/vec.h"
#include "ops/common.h"

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
                  if (ctx.needs(0)) {  // dA[batch i] += G · Bᵀ
                    const auto at = batch_offsets(a_batch, out_batch, M * K);
                    const float* pb = ctx.read_data(sb);
                    const gemm::OperandId ib = b_leaf ? operand_id(*sb.storage()) : gemm::OperandId{};
                    Array ga = xt::zeros<float>(to_xshape(as));
                    for (int64_t i = 0; i < batch; ++i)
                      gemm::gemm(false, !ob.m.trans, M, K, N, 1.0f, g + i * M * N, N,
                                 pb + ob.at[i], ob.m.ld, 1.0f, ga.data() + at[i], K, {}, ib);
                    ctx.give(0, std::move(ga));
                  }
                  if (ctx.needs(1)) {  // dB[batch i] += Aᵀ · G
                    const auto at = batch_offsets(b_batch, out_batch, K * N);
                    const float* pa = ctx.read_data(sa);
                    const gemm::OperandId ia = a_leaf ? operand_id(*sa.storage()) : gemm::OperandId{};
                    Array gb = xt::zeros<float>(to_xshape(bs));
                    for (int64_t i = 0; i < batch; ++i)
                      gemm::gemm(!oa.m.trans, false, K, N, M, 1.0f, pa + oa.at[i], oa.m.ld,
                                 g + i * M * N, N, 1.0f, gb.data() + at[i], N, ia);
                    ctx.give(1, std::move(gb));
                  }
                });
}

// y = x Wᵀ + b, x seen as (M, in)      dx = G W,  dW = Gᵀ x,  db = Σ_rows G
Tensor linear(const Tensor& x_arg, const Tensor& weight_arg, const Tensor& bias_arg) {
  if (!x_arg.defined() || !weight_arg.defined()) throw ValueError("linear: undefined input or weight");
  // The GEMM reads x and the weight where they lie when it can (a transposed weight by flag).
  Tensor x_copy, weight_copy, bias_copy;
  const Tensor& x = as_matrix(*x_arg.impl()).ok ? x_arg : (x_copy = x_arg.contiguous());
  const Tensor& weight = as_matrix(*weight_arg.impl()).ok ? weight_arg : (weight_copy = weight_arg.contiguous());
  const Tensor& bias = dense(bias_arg, bias_copy);
  const Shape xs = x.shape(), ws = weight.shape();
  if (ws.size() != 2) shape_error("linear", "weight must be 2-D (out, in), got " + to_string(ws));
  const int64_t out = ws[0], in = ws[1];
  if (xs.empty() || xs.back() != in)
    shape_error("linear", "input last dim " + (xs.empty() ? std::string("(none)") : std::to_string(xs.back())) +
                              ", expected " + std::to_string(in) + " (weight " + to_string(ws) +
                              "), input shape " + to_string(xs));
  if (bias.defined() && bias.shape() != Shape{out})
    shape_error("linear", "bias shape " + to_string(bias.shape()) + ", expected [" +
                              std::to_string(out) + "]");
  const MatrixLayout mx = as_matrix(*x.impl()), mw = as_matrix(*weight.impl());
  const int64_t rows = numel_of(Shape(xs.begin(), xs.end() - 1));
  Shape ys = xs;
  ys.back() = out;
  Array y = Array::from_shape(to_xshape(ys));
  float beta = 0.0f;
  if (bias.defined()) {  // fold the bias into the GEMM: y = b, then y += x Wᵀ
    const float* pb = val(bias).data();
    for (int64_t r = 0; r < rows; ++r) std::copy(pb, pb + out, y.data() + r * out);
    beta = 1.0f;
  }
  gemm::gemm(mx.trans, !mw.trans, rows, out, in, 1.0f, x.impl()->ptr(), mx.ld,
             weight.impl()->ptr(), mw.ld, beta, y.data(), out, operand_id(*x.impl()),
             operand_id(*weight.impl()));

  const bool rec = will_record(x, weight, bias);
  const Saved sx = rec && weight.requires_grad() ? Saved::strided(x) : Saved();  // for dW
  const Saved sw = rec && x.requires_grad() ? Saved::strided(weight) : Saved();  // for dx
  const bool x_leaf = !x.impl()->grad_fn, w_leaf = !weight.impl()->grad_fn;  // for the device cache
  return record("linear", std::move(y), {x, weight, bias},
                [sx, sw, xs, ws, rows, in, out, mx, mw, x_leaf, w_leaf](BackwardContext& ctx) {
                  const float* g = ctx.grad.data();
                  if (ctx.needs(0)) {  // dx = G W
                    Array gx = Array::from_shape(to_xshape(xs));
                    const float* pw = ctx.read_data(sw);
                    gemm::gemm(false, mw.trans, rows, in, out, 1.0f, g, out, pw, mw.ld, 0.0f,
                               gx.data(), in, {},
                               w_leaf ? operand_id(*sw.storage()) : gemm::OperandId{});
                    ctx.give(0, std::move(gx));
                  }
                  if (ctx.needs(1)) {  // dW = Gᵀ x
                    Array gw = Array::from_shape(to_xshape(ws));
                    const float* px = ctx.read_data(sx);
                    gemm::gemm(true, mx.trans, out, in, rows, 1.0f, g, out, px, mx.ld, 0.0f,
                               gw.data(), in, {},
                               x_leaf ? operand_id(*sx.storage()) : gemm::OperandId{});
                    ctx.give(1, std::move(gw));
                  }
                  if (ctx.needs(2)) {  // db = Σ_r G[r], row after row (the vector kernels)
                    Array gb = xt::zeros<float>({static_cast<size_t>(out)});
                    const vec::Kernels& k = vec::kernels();
                    const auto n = static_cast<size_t>(out);
                    for (int64_t r = 0; r < rows; ++r)
                      k.binary(vec::Binary::Add, gb.data(), n, g + r * out, n, gb.data(), n);
                    ctx.give(2, std::move(gb));
                  }
                });
}

}  // namespace tg
