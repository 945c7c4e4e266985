#pragma once
// Multi-head attention, the position-wise feed-forward block and the pre-LN transformer block.
//
// Legend: B = batch, Tq = query length, Tk = key/value length, C = embed_dim (d_model),
// H = heads, Dh = C / H (head dim), F = d_ff.
//
// Parameters and PyTorch's nn.MultiheadAttention: PyTorch packs the three input projections
// into in_proj_weight (3C, C) and in_proj_bias (3C); here they are three Linear submodules:
//   in_proj_weight[0:C]   = q_proj.weight    in_proj_bias[0:C]   = q_proj.bias
//   in_proj_weight[C:2C]  = k_proj.weight    in_proj_bias[C:2C]  = k_proj.bias
//   in_proj_weight[2C:3C] = v_proj.weight    in_proj_bias[2C:3C] = v_proj.bias
//   out_proj.weight, out_proj.bias           the same names
// Head h owns rows [h·Dh, (h+1)·Dh) of each of q_proj, k_proj and v_proj, and columns
// [h·Dh, (h+1)·Dh) of out_proj.weight (the heads are concatenated before out_proj).
#include <memory>
#include <string>

#include "tapegrad/arg.h"
#include "tapegrad/nn/kv_cache.h"
#include "tapegrad/nn/cloneable.h"
#include "tapegrad/nn/layers.h"
#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/unary.h"
#include "tapegrad/ops.h"

namespace tg {
namespace nn {

namespace impl {
struct PackedInProjection;  // nn/attention.cpp
}  // namespace impl

// ---- MultiheadAttention ----------------------------------------------------------------------

struct MultiheadAttentionOptions {
  MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads)
      : embed_dim_(embed_dim), num_heads_(num_heads) {}
  TG_ARG(int64_t, embed_dim);
  TG_ARG(int64_t, num_heads);
  /// Biases in all four projections (PyTorch's bias=).
  TG_ARG(bool, bias) = true;
  /// Dropout on the attention weights, in training.
  TG_ARG(float, dropout) = 0.0f;
};

/// What one attention call may be given besides query, key and value. Masks use the
/// conventions of tg::AttnMask: a boolean mask is 0/1 with NONZERO = MASKED OUT, as in PyTorch's
/// nn.MultiheadAttention; an additive mask is added to the scaled scores (-inf excludes).
struct AttentionForwardOptions {
  /// Query i does not attend to key j > i (top-left aligned when Tq != Tk).
  TG_ARG(bool, causal) = false;
  /// (Tq, Tk); (B·H, Tq, Tk) with batch-major rows, as PyTorch; or 4-D, broadcast to (B, H, Tq, Tk).
  TG_ARG(AttnMask, attn_mask);
  /// (B, Tk): boolean (1 = padding, ignored) or additive.
  TG_ARG(AttnMask, key_padding_mask);
  /// Also return the weights per head, (B, H, Tq, Tk), detached (PyTorch averages over heads
  /// by default; this is its average_attn_weights=False).
  TG_ARG(bool, need_weights) = false;
};

struct AttentionOutput {
  Tensor output;   // (B, Tq, C)
  Tensor weights;  // (B, H, Tq, Tk) when need_weights, else undefined
};

/// softmax(Q_h K_hᵀ/√Dh + masks) V_h for each head h, concatenated, then out_proj. Batch-first.
/// A query row whose keys are all masked gives zero weights and a zero attention result (so
/// the output row is out_proj's bias); PyTorch gives NaN there.
class MultiheadAttention : public Cloneable<MultiheadAttention> {
 public:
  explicit MultiheadAttention(const MultiheadAttentionOptions& options);
  MultiheadAttention(int64_t embed_dim, int64_t num_heads)
      : MultiheadAttention(MultiheadAttentionOptions(embed_dim, num_heads)) {}

  /// query (B, Tq, C), key (B, Tk, C), value (B, Tk, C) -> output (B, Tq, C) and, if asked,
  /// weights (B, H, Tq, Tk). Self-attention passes the same tensor three times.
  AttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                          const AttentionForwardOptions& options = AttentionForwardOptions());
  /// Cached causal self-attention for decoding: x (B, T, C) holds only the NEW positions; their
  /// keys and values are appended to layer `layer` of the cache, and each new position attends
  /// to every cached one and to the new ones up to itself (causal, aligned at the bottom
  /// right), padding excluded -> (B, T, C). Inference only: nothing is recorded on the tape.
  Tensor forward(const Tensor& x, KVCache& cache, int64_t layer);
  /// As PyTorch: q/k/v weights Xavier-uniform as one packed (3C, C) matrix; out_proj Linear's
  /// default (Xavier-uniform); every bias zero.
  void reset_parameters();

  std::string extra_repr() const override;
  std::string signature() const override;

  MultiheadAttentionOptions options;
  int64_t head_dim;  // Dh
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, out_proj;

 private:
  /// Self-attention (query, key and value the same tensor) projects q, k and v with one GEMM
  /// over a (3C, C) copy of the three weights (and a (3C) one of the biases), kept here and
  /// packed again only when one of them changed (written, or another tensor assigned). The
  /// parameters and their gradients stay those of q_proj, k_proj and v_proj.
  std::shared_ptr<impl::PackedInProjection> packed_;
  friend struct impl::PackedInProjection;
  Tensor packed_projection(const Tensor& x);  // (B, T, C) -> (B, T, 3C), or undefined
};

// ---- FeedForward -----------------------------------------------------------------------------

struct FeedForwardOptions {
  FeedForwardOptions(int64_t d_model, int64_t d_ff) : d_model_(d_model), d_ff_(d_ff) {}
  TG_ARG(int64_t, d_model);
  TG_ARG(int64_t, d_ff);
  /// "gelu" (exact) or "relu".
  TG_ARG(std::string, activation) = "gelu";
  /// Dropout after the activation, in training.
  TG_ARG(float, dropout) = 0.0f;
};

/// fc2(dropout(act(fc1(x)))): (..., C) -> (..., F) -> (..., C). Submodules fc1 (C→F), fc2 (F→C).
class FeedForward : public Cloneable<FeedForward, UnaryModule> {
 public:
  explicit FeedForward(const FeedForwardOptions& options);
  FeedForward(int64_t d_model, int64_t d_ff) : FeedForward(FeedForwardOptions(d_model, d_ff)) {}

  /// (..., C) -> (..., C)
  Tensor forward(const Tensor& x) override;

  std::string extra_repr() const override;
  std::string signature() const override;

  FeedForwardOptions options;
  std::shared_ptr<Linear> fc1, fc2;
};

// ---- TransformerBlock ------------------------------------------------------------------------

struct TransformerBlockOptions {
  TransformerBlockOptions(int64_t d_model, int64_t num_heads, int64_t d_ff)
      : d_model_(d_model), num_heads_(num_heads), d_ff_(d_ff) {}
  TG_ARG(int64_t, d_model);
  TG_ARG(int64_t, num_heads);
  TG_ARG(int64_t, d_ff);
  /// One rate for the attention weights, inside the feed-forward, and on both residual branches.
  TG_ARG(float, dropout) = 0.0f;
  /// The feed-forward activation: "gelu" or "relu".
  TG_ARG(std::string, activation) = "gelu";
  /// Biases in the attention projections (the feed-forward and LayerNorms always have them).
  TG_ARG(bool, bias) = true;
  TG_ARG(float, layer_norm_eps) = 1e-5f;
};

/// Pre-LN: x = x + dropout(attn(ln1(x))), then x = x + dropout(ffn(ln2(x))).
/// Submodules ln1, attn (self-attention), ln2, ffn.
class TransformerBlock : public Cloneable<TransformerBlock, UnaryModule> {
 public:
  explicit TransformerBlock(const TransformerBlockOptions& options);
  TransformerBlock(int64_t d_model, int64_t num_heads, int64_t d_ff)
      : TransformerBlock(TransformerBlockOptions(d_model, num_heads, d_ff)) {}

  /// (B, T, C) -> (B, T, C), no mask.
  Tensor forward(const Tensor& x) override;
  /// (B, T, C) -> (B, T, C) with causal/attn_mask/key_padding_mask (need_weights is ignored).
  Tensor forward(const Tensor& x, const AttentionForwardOptions& attention);
  /// (B, T, C) new positions -> (B, T, C), attending through layer `layer` of the cache (see
  /// MultiheadAttention's cached forward). Equals the causal forward over the whole sequence,
  /// position by position. Inference only: nothing is recorded on the tape.
  Tensor forward(const Tensor& x, KVCache& cache, int64_t layer);

  std::string extra_repr() const override;
  std::string signature() const override;

  TransformerBlockOptions options;
  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<MultiheadAttention> attn;
  std::shared_ptr<FeedForward> ffn;
};

}  // namespace nn
}  // namespace tg
