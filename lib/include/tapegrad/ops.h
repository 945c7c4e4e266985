#pragma once
// The differentiable ops. Each one is recorded on the tape when an input requires a
// gradient. Shapes follow PyTorch: elementwise ops broadcast like numpy, axes may be
// negative, and a mismatch throws tg::ShapeError naming the op and both shapes.
//
// Legend: B = batch, T = time, C = channels/features, N = rows, K = classes.
#include <tuple>
#include <utility>
#include <vector>

#include "tapegrad/arg.h"
#include "tapegrad/tensor.h"

namespace tg {

// ---- elementwise (broadcasting) ------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, float s);
Tensor mul(const Tensor& a, float s);
/// s / a
Tensor rdiv(float s, const Tensor& a);
Tensor neg(const Tensor& a);
/// a ** p with a scalar exponent.
Tensor pow(const Tensor& a, float p);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
/// GELU: exact (erf) by default; approximate = true uses PyTorch's tanh form.
Tensor gelu(const Tensor& a, bool approximate = false);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator+(const Tensor& a, float s) { return add(a, s); }
inline Tensor operator+(float s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(const Tensor& a, float s) { return add(a, -s); }
inline Tensor operator-(float s, const Tensor& a) { return add(neg(a), s); }
inline Tensor operator*(const Tensor& a, float s) { return mul(a, s); }
inline Tensor operator*(float s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, float s) { return mul(a, 1.0f / s); }
inline Tensor operator/(float s, const Tensor& a) { return rdiv(s, a); }
/// In place (Tensor::add_, ...): a's values change, a's shape does not.
inline const Tensor& operator+=(const Tensor& a, const Tensor& b) { return a.add_(b); }
inline const Tensor& operator-=(const Tensor& a, const Tensor& b) { return a.sub_(b); }
inline const Tensor& operator*=(const Tensor& a, const Tensor& b) { return a.mul_(b); }
inline const Tensor& operator/=(const Tensor& a, const Tensor& b) { return a.div_(b); }
inline const Tensor& operator+=(const Tensor& a, float s) { return a.add_(s); }
inline const Tensor& operator-=(const Tensor& a, float s) { return a.sub_(s); }
inline const Tensor& operator*=(const Tensor& a, float s) { return a.mul_(s); }
inline const Tensor& operator/=(const Tensor& a, float s) { return a.div_(s); }

// ---- reductions ----------------------------------------------------------------------
/// Sum of every element: a 0-d tensor.
Tensor sum(const Tensor& a);
Tensor sum(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim = false);
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim = false);
/// Max along one dim: (values, int64 indices), as LibTorch's std::tuple. The gradient goes to
/// the argmax (the first one on ties; NaN wins, as in PyTorch).
std::tuple<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
/// Min along one dim: (values, int64 indices), the same rules.
std::tuple<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);

// ---- softmax family ----------------------------------------------------------------------
Tensor softmax(const Tensor& a, int64_t axis = -1);
Tensor log_softmax(const Tensor& a, int64_t axis = -1);

// ---- products ---------------------------------------------------------------------------
/// torch.matmul: 1-D·1-D, 2-D, and batched N-D with broadcast batch dims. Every product is
/// one BLAS sgemm (transposes by flag, never copied).
Tensor matmul(const Tensor& a, const Tensor& b);
/// y = x Wᵀ + b: x (..., in), weight (out, in), bias (out) or undefined -> (..., out).
/// The bias is folded into the GEMM.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- views -------------------------------------------------------------------------------
// These return views that share the input's storage (Tensor::strides(), "views" in
// tensor.h): no copy, and writes through either are seen by both. Gradients flow through
// them like through any op.
Tensor transpose(const Tensor& a, int64_t d0, int64_t d1);
Tensor permute(const Tensor& a, const std::vector<int64_t>& dims);
/// transpose(a, 0, 1) for a 2-D tensor; a itself (a view) for 0-D and 1-D.
Tensor t(const Tensor& a);
/// A view with a new shape; one dimension may be -1 (inferred). Throws ShapeError if the
/// strides do not allow one (after a transpose, say), naming reshape().
Tensor view(const Tensor& a, const Shape& shape);
/// view() when the strides allow it, else a contiguous copy in the new shape (as PyTorch).
Tensor reshape(const Tensor& a, const Shape& shape);
/// Merges dims start..end (inclusive) into one (a view when reshape's would be).
Tensor flatten(const Tensor& a, int64_t start = 0, int64_t end = -1);
/// Removes every size-1 dim, or the given one (only if it has size 1).
Tensor squeeze(const Tensor& a);
Tensor squeeze(const Tensor& a, int64_t dim);
Tensor unsqueeze(const Tensor& a, int64_t dim);
/// The slice [start, start + length) of one dim.
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length);
/// Same as narrow with Python slice semantics: [start, end), negative values count from the end.
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end);
/// The index-th entry along dim, which disappears (negative index counts from the end).
Tensor select(const Tensor& a, int64_t dim, int64_t index);
/// Repeats size-1 dims (and new leading ones) without copying: stride 0. -1 keeps a dim.
/// In-place writes to such a view are refused, as in PyTorch.
Tensor expand(const Tensor& a, const Shape& sizes);

// ---- shape ops that copy ------------------------------------------------------------------
Tensor cat(const std::vector<Tensor>& tensors, int64_t axis = 0);

// ---- indexing -----------------------------------------------------------------------------
/// Rows of `a` along `axis` picked by 1-D indices; the gradient scatter-adds (repeats add up).
Tensor index_select(const Tensor& a, int64_t axis, const Indices& index);
/// Embedding lookup: weight (V, C), ids of any shape S -> (S..., C). Rows equal to
/// padding_idx (if >= 0) receive no gradient.
Tensor embedding(const Tensor& weight, const Indices& ids, int64_t padding_idx = -1);
/// A mask is a bool tensor (what comparisons give), or a float one (nonzero = true),
/// broadcast to a's shape.
Tensor masked_fill(const Tensor& a, const Tensor& mask, float value);
/// cond ? a : b elementwise, everything broadcast together; cond is bool (or float, nonzero =
/// true).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// ---- neural-network ops -------------------------------------------------------------------
/// Zeroes elements with probability p and scales the rest by 1/(1-p); identity when
/// training is false or p == 0. Draws from the global generator.
Tensor dropout(const Tensor& a, float p, bool training);
/// Normalizes over the trailing dims `normalized_shape`; weight and bias may be undefined.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), float eps = 1e-5f);

enum class Reduction { None, Mean, Sum };

struct CrossEntropyOptions {
  TG_ARG(Reduction, reduction) = Reduction::Mean;
  /// Targets equal to it add nothing to the loss or its gradient.
  TG_ARG(int64_t, ignore_index) = -100;
  /// Mixes the one-hot target with the uniform distribution: (1 - s) one_hot + s / K.
  TG_ARG(float, label_smoothing) = 0.0f;
  /// Class weights (K), or undefined (all 1). A constant: one that requires a gradient is
  /// refused. With class targets each position's loss is multiplied by weight[target], and
  /// Mean divides by the sum of weight[target] over the targets that are not ignore_index.
  TG_ARG(Tensor, weight);
};

/// logits (N, K) or (N, K, d...) with class targets (N) or (N, d...), as in PyTorch.
/// Mean reduction divides by the number of targets that are not ignore_index (by the sum of
/// their class weights, with a weight). Probability targets: cross_entropy in ops/loss.h.
Tensor cross_entropy(const Tensor& logits, const Indices& targets,
                     const CrossEntropyOptions& options = CrossEntropyOptions());
/// Negative log-likelihood of log-probabilities (N, K) or (N, K, d...).
Tensor nll_loss(const Tensor& log_probs, const Indices& targets,
                const CrossEntropyOptions& options = CrossEntropyOptions());
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

// ---- attention ------------------------------------------------------------------------------
// Legend: Tq = queries, Tk = keys, D = head dim, Dv = value dim.

/// A mask on attention scores (..., Tq, Tk), broadcast over leading dims like numpy.
/// additive: added to the scaled scores; -inf excludes a key; it may require a gradient.
/// boolean: a bool tensor (or 0/1 floats), TRUE = MASKED OUT (that key is not attended): the convention of
/// PyTorch's nn.MultiheadAttention (attn_mask, key_padding_mask) and of masked_fill.
/// PyTorch 2's F.scaled_dot_product_attention reads a bool True as "attend": the opposite.
struct AttnMask {
  enum class Kind { None, Additive, Boolean };
  AttnMask() = default;
  /// An undefined tensor gives no mask.
  static AttnMask additive(Tensor m) { return AttnMask(std::move(m), Kind::Additive); }
  static AttnMask boolean(Tensor m) { return AttnMask(std::move(m), Kind::Boolean); }
  bool defined() const { return kind != Kind::None; }
  bool is_boolean() const { return kind == Kind::Boolean; }
  Tensor values;
  Kind kind = Kind::None;

 private:
  AttnMask(Tensor m, Kind k) : values(std::move(m)), kind(values.defined() ? k : Kind::None) {}
};

/// softmax(q kᵀ/√D + mask) v as one fused op (one forward, one backward closure, every
/// product a GEMM with transpose flags). q (..., Tq, D), k (..., Tk, D), v (..., Tk, Dv) with
/// equal leading dims -> (..., Tq, Dv). is_causal excludes key j > query i (top-left
/// aligned). dropout_p drops attention weights when training (as F.scaled_dot_product_attention
/// does whenever dropout_p > 0). A query row whose keys are ALL masked gets zero weights and a
/// zero output, and passes no gradient (PyTorch gives NaN there). If `weights` is non-null it
/// receives the weights (..., Tq, Tk) that were applied (after dropout), detached from the tape.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttnMask& attn_mask = AttnMask(), bool is_causal = false,
                                    float dropout_p = 0.0f, bool training = true,
                                    Tensor* weights = nullptr);

}  // namespace tg

// More ops, by kind: reductions (max/min of a tensor, var, norm...), combining and splitting
// (stack, split, flip...), creation (eye, linspace, tril...) and whole-tensor checks; more
// elementwise ops (clamp, sin, softplus, pow...) and losses (BCE, smooth L1, Huber, L1, KL,
// probability targets); int64 and bool tensors' ops (comparisons, argmax, nonzero, one_hot...);
// indexing and selection (gather/scatter, sort/topk, multinomial, x.index({...})); fused ops
// (the residual add with layer_norm).
#include "tapegrad/ops/combine.h"
#include "tapegrad/ops/create.h"
#include "tapegrad/ops/fused.h"
#include "tapegrad/ops/integer.h"
#include "tapegrad/ops/index.h"
#include "tapegrad/ops/loss.h"
#include "tapegrad/ops/pointwise.h"
#include "tapegrad/ops/reduce.h"
