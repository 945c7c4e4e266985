#pragma once
// Library-internal: the fused attention kernel behind tg::scaled_dot_product_attention, with
// operand layouts given by strides so nn::MultiheadAttention can run it on (B, T, H·Dh)
// projections directly, without permuting heads out and back.
//
// Legend: B = batch, H = heads, Tq = queries, Tk = keys, D = head dim, Dv = value head dim.
#include "ops/common.h"

namespace tg {
namespace detail {

/// Where the matrix of batch b, head h of an operand starts (at + b·sb + h·sh) and how far
/// apart its rows are (ld); its columns are adjacent. (B, H, T, D) contiguous: {H·T·D, T·D, D};
/// (B, T, H·D): {T·H·D, D, H·D}, which is also the (B, H, T, D) view of it. `at` places an
/// operand inside a packed tensor: k in (B, T, 3·H·D) is {T·3HD, D, 3HD, at = HD}.
struct HeadLayout {
  int64_t sb = 0, sh = 0, ld = 0, at = 0;
};

struct AttentionShape {
  const char* op = "scaled_dot_product_attention";
  int64_t B = 1, H = 1, Tq = 0, Tk = 0, D = 0, Dv = 0;
  HeadLayout q, k, v, out;  // where the operands' matrices are (from their element 0)
  HeadLayout dq, dk, dv;    // how their gradients (dense, in the operands' shapes) are laid out
  Shape out_shape;  // the output tensor's shape (its layout is `out`)
  Shape lead;       // logical batch dims, prod = B·H: masks broadcast over lead + (Tq, Tk),
                    // and the weights have that shape
  /// q, k and v are one tensor (self-attention's packed projection), passed three times, their
  /// places in it given by the layouts' `at`: its gradient (dq, dk, dv side by side, in the
  /// layouts dq, dk, dv) is one array, given to input 0 alone.
  bool packed = false;
};

/// The kernel. Shapes of q, k, v must already fit `s`; the mask is checked here (it must
/// broadcast to lead + (Tq, Tk)). Causal attention without dropout, returned weights or a
/// mask that needs a gradient runs the fused causal kernel (causal_attention); everything
/// else, and causal attention over fewer than attention_tiles().min_keys keys, the reference
/// kernel (reference_attention).
Tensor attention(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                 const AttnMask& mask, bool is_causal, float dropout_p, bool training,
                 Tensor* weights);

/// The reference kernel: the whole (Tq, Tk) score matrix of every head, softmax over it, and
/// P saved for the backward. Handles every case. The mask must be contiguous.
Tensor reference_attention(const AttentionShape& s, const Tensor& q, const Tensor& k,
                           const Tensor& v, const AttnMask& mask, bool is_causal, float dropout_p,
                           bool training, Tensor* weights);

/// The fused causal kernel (FlashAttention's tiling): tiles of attention_tiles() queries by
/// keys, none above the diagonal, an online softmax; saves q, k, v, the output and each row's
/// logsumexp (no Tq × Tk matrix), and recomputes the tiles in the backward. No dropout and no
/// weights; the mask (contiguous) may not need a gradient.
Tensor causal_attention(const AttentionShape& s, const Tensor& q, const Tensor& k,
                        const Tensor& v, const AttnMask& mask);

/// The fused kernel's tile: q queries × k keys. Settable for tests (small tiles put many edges
/// in small inputs) and benchmarks; a call reads it once, at its forward. The default, 32 × 128,
/// took the fewest instructions at B 8, H 8, T 128, D 32 (callgrind, forward + backward, in
/// millions: 64 × 64 106, 32 × 32 105, 64 × 128 100, 32 × 128 89, 16 × 128 88; the reference
/// kernel 104): rows of 32 skip most of the upper triangle, and a key tile as long as T keeps
/// the products few.
/// min_keys: causal attention over fewer keys runs the reference kernel, whose score matrix is
/// small there and which measured faster (W3's T 64: 55 against 57 million instructions, and
/// about 20% less CPU time on a busy machine).
struct AttentionTiles {
  int64_t q = 32, k = 128;
  int64_t min_keys = 128;
};
AttentionTiles attention_tiles();
void set_attention_tiles(AttentionTiles tiles);

/// While one is alive, attention() on this thread runs the reference kernel even where the
/// fused causal one applies: tests compare the two, benchmarks time both.
class ReferenceAttentionScope {
 public:
  ReferenceAttentionScope();
  ~ReferenceAttentionScope();
  ReferenceAttentionScope(const ReferenceAttentionScope&) = delete;
  ReferenceAttentionScope& operator=(const ReferenceAttentionScope&) = delete;

 private:
  bool previous_;
};

}  // namespace detail
}  // namespace tg
