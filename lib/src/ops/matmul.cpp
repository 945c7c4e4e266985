// Products: matmul (torch.matmul semantics) and linear (y = x Wᵀ + b). Every product is a
// call to gemm::gemm with transpose flags; no operand is ever transposed by copying.
#include <xtensor/xbuilder.hpp>

#include "backend/gemm.h"
#include "ops/common.h"

namespace tg {
using namespace detail;

namespace {

// Offsets (in elements) of each batch's matrix inside an operand whose batch dims
// `batch` broadcast to `out_batch`; broadcast dims repeat the same matrix.
std::vector<int64_t> batch_offsets(const Shape& batch, const Shape& out_batch, int64_t matrix) {
  return strided_offsets(out_batch, broadcast_strides(batch, out_batch, matrix));
}

}  // namespace

// C = A·B                 dA = G·Bᵀ, dB = Aᵀ·G   (summed over broadcast batch dims)
Tensor matmul(const Tensor& a_arg, const Tensor& b_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  Tensor b_copy;
  const Tensor& b = dense(b_arg, b_copy);
  if (!a.defined() || !b.defined()) throw ValueError("matmul: undefined tensor");
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

  const auto a_off = batch_offsets(a_batch, out_batch, M * K);
  const auto b_off = batch_offsets(b_batch, out_batch, K * N);
  const int64_t batch = static_cast<int64_t>(a_off.size());
  Array c = Array::from_shape(to_xshape(out_shape));
  const float *pa = val(a).data(), *pb = val(b).data();
  for (int64_t i = 0; i < batch; ++i)
    gemm::gemm(false, false, M, N, K, 1.0f, pa + a_off[i], K, pb + b_off[i], N, 0.0f,
               c.data() + i * M * N, N);

  const bool rec = will_record(a, b);  // each saves what the other's gradient reads
  const Saved sa = rec && b.requires_grad() ? Saved(a) : Saved();
  const Saved sb = rec && a.requires_grad() ? Saved(b) : Saved();
  return record("matmul", std::move(c), {a, b},
                [sa, sb, as, bs, M, N, K, a_off, b_off, batch](BackwardContext& ctx) {
                  const float* g = ctx.grad.data();
                  if (ctx.needs(0)) {  // dA[a_off] += G · Bᵀ
                    Array ga = xt::zeros<float>(to_xshape(as));
                    for (int64_t i = 0; i < batch; ++i)
                      gemm::gemm(false, true, M, K, N, 1.0f, g + i * M * N, N,
                                 ctx.read(sb).data() + b_off[i], N, 1.0f, ga.data() + a_off[i], K);
                    ctx.give(0, std::move(ga));
                  }
                  if (ctx.needs(1)) {  // dB[b_off] += Aᵀ · G
                    Array gb = xt::zeros<float>(to_xshape(bs));
                    for (int64_t i = 0; i < batch; ++i)
                      gemm::gemm(true, false, K, N, M, 1.0f, ctx.read(sa).data() + a_off[i], K,
                                 g + i * M * N, N, 1.0f, gb.data() + b_off[i], N);
                    ctx.give(1, std::move(gb));
                  }
                });
}

// y = x Wᵀ + b, x seen as (M, in)      dx = G W,  dW = Gᵀ x,  db = Σ_rows G
Tensor linear(const Tensor& x_arg, const Tensor& weight_arg, const Tensor& bias_arg) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  Tensor weight_copy;
  const Tensor& weight = dense(weight_arg, weight_copy);
  Tensor bias_copy;
  const Tensor& bias = dense(bias_arg, bias_copy);
  if (!x.defined() || !weight.defined()) throw ValueError("linear: undefined input or weight");
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
  gemm::gemm(false, true, rows, out, in, 1.0f, val(x).data(), in, val(weight).data(), in, beta,
             y.data(), out);

  const bool rec = will_record(x, weight, bias);
  const Saved sx = rec && weight.requires_grad() ? Saved(x) : Saved();  // for dW
  const Saved sw = rec && x.requires_grad() ? Saved(weight) : Saved();  // for dx
  return record("linear", std::move(y), {x, weight, bias},
                [sx, sw, xs, ws, rows, in, out](BackwardContext& ctx) {
                  const float* g = ctx.grad.data();
                  if (ctx.needs(0)) {
                    Array gx = Array::from_shape(to_xshape(xs));
                    gemm::gemm(false, false, rows, in, out, 1.0f, g, out, ctx.read(sw).data(), in, 0.0f,
                               gx.data(), in);
                    ctx.give(0, std::move(gx));
                  }
                  if (ctx.needs(1)) {
                    Array gw = Array::from_shape(to_xshape(ws));
                    gemm::gemm(true, false, out, in, rows, 1.0f, g, out, ctx.read(sx).data(), in, 0.0f,
                               gw.data(), in);
                    ctx.give(1, std::move(gw));
                  }
                  if (ctx.needs(2)) {
                    Array gb = xt::zeros<float>({static_cast<size_t>(out)});
                    float* pb = gb.data();
                    for (int64_t r = 0; r < rows; ++r)
                      for (int64_t o = 0; o < out; ++o) pb[o] += g[r * out + o];
                    ctx.give(2, std::move(gb));
                  }
                });
}

}  // namespace tg
