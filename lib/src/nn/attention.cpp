// MultiheadAttention, FeedForward and the pre-LN TransformerBlock.
//
// Legend: B = batch, Tq = queries, Tk = keys, C = embed_dim, H = heads, Dh = C / H, F = d_ff.
//
// Attention runs the fused kernel (ops_attention.cpp) straight on the (B, T, C) projections:
// head h of batch b is the (T, Dh) block at column h·Dh with rows C apart, so heads are never
// permuted out and back, and the result lands in (B, Tq, C) ready for out_proj.
#include "tapegrad/nn/attention.h"

#include <cmath>
#include <limits>

#include "nn/format.h"
#include "ops/attention.h"
#include "ops/linear_act.h"
#include "ops/no_grad.h"
#include "nn/packed_projection.h"
#include "ops/packed.h"
#include "tapegrad/autograd.h"
#include "tapegrad/nn/init.h"

namespace tg {
namespace nn {

namespace {

// The residual x + dropout(branch). Under no-grad (inference) the sum is written into the
// branch's fresh buffer instead of a third one, so a block keeps fewer activations alive.
Tensor residual(const Tensor& x, const Tensor& branch, float p, bool training) {
  Tensor y = dropout(branch, p, training);
  if (is_grad_enabled()) return x + y;
  y.add_(x);
  return y;
}

// FeedForward under no-grad: the activation in place (no second (..., F) buffer), and x let go
// as soon as fc1 has read it (it is freed then if the caller passed a temporary).
Tensor forward_no_grad(FeedForward& ffn, Tensor x) {
  Tensor h = ffn.fc1->forward(x);
  x = Tensor();
  if (ffn.options.activation() == "gelu")
    detail::gelu_no_grad_(h, false);
  else
    h.clamp_(0.0f, std::numeric_limits<float>::infinity());
  return ffn.fc2->forward(dropout(h, ffn.options.dropout(), ffn.is_training()));
}

// A mask as additive values: a boolean one becomes 0 (kept) / -inf (masked).
Tensor as_additive(const AttnMask& m) {
  if (!m.is_boolean()) return m.values;
  return masked_fill(zeros(m.values.shape()), m.values, -std::numeric_limits<float>::infinity());
}

}  // namespace

// ---- MultiheadAttention ----------------------------------------------------------------------


namespace impl {
namespace {
thread_local bool t_separate = false;  // a SeparateProjectionsScope is alive
}  // namespace
SeparateProjectionsScope::SeparateProjectionsScope() : previous_(t_separate) { t_separate = true; }
SeparateProjectionsScope::~SeparateProjectionsScope() { t_separate = previous_; }
bool SeparateProjectionsScope::active() { return t_separate; }
}  // namespace impl

// x Wᵀ + b with W = cat(q, k, v weights) (3C, C), b likewise: q, k and v side by side in
// (B, T, 3C). Undefined when the parts cannot be packed (a weight not (C, C) float32, biases
// only in some): the caller then runs the three Linears, whose errors say what is wrong.
Tensor MultiheadAttention::packed_projection(const Tensor& x) {
  const int64_t C = options.embed_dim();
  const std::vector<Tensor> weights = {q_proj->weight, k_proj->weight, v_proj->weight};
  const std::vector<Tensor> biases = {q_proj->bias, k_proj->bias, v_proj->bias};
  const bool bias = biases[0].defined();
  for (const Tensor& w : weights)
    if (!w.defined() || w.dtype() != kFloat32 || w.shape() != Shape{C, C}) return Tensor();
  for (const Tensor& b : biases)
    if (b.defined() != bias || (bias && (b.dtype() != kFloat32 || b.shape() != Shape{C})))
      return Tensor();
  std::vector<impl::PackedInProjection::Stamp> now;
  for (const Tensor& t : {weights[0], weights[1], weights[2], biases[0], biases[1], biases[2]})
    if (t.defined()) now.push_back(impl::PackedInProjection::stamp(t));
  std::shared_ptr<detail::Storage> w, b;
  {
    std::lock_guard<std::mutex> lock(packed_->mutex);
    if (!packed_->weight || now != packed_->stamps ||
        !detail::still_packed(*packed_->weight, weights) ||
        (bias && !detail::still_packed(*packed_->bias, biases))) {
      packed_->weight = detail::pack_rows(weights);
      packed_->bias = bias ? detail::pack_rows(biases) : nullptr;
      packed_->stamps = std::move(now);
      ++packed_->packs;
    }
    w = packed_->weight;
    b = packed_->bias;
  }
  return linear(x, detail::packed_rows(w, weights), bias ? detail::packed_rows(b, biases) : Tensor());
}

MultiheadAttention::MultiheadAttention(const MultiheadAttentionOptions& o)
    : Cloneable("MultiheadAttention"), options(o), packed_(std::make_shared<impl::PackedInProjection>()) {
  if (o.embed_dim() <= 0 || o.num_heads() <= 0)
    value_error("embed_dim and num_heads must be positive, got embed_dim=" +
                std::to_string(o.embed_dim()) + ", num_heads=" + std::to_string(o.num_heads()));
  if (o.embed_dim() % o.num_heads() != 0)
    value_error("embed_dim (" + std::to_string(o.embed_dim()) + ") must be divisible by num_heads (" +
                std::to_string(o.num_heads()) + ")");
  if (!(o.dropout() >= 0.0f && o.dropout() <= 1.0f))
    value_error("dropout must be in [0, 1], got " + detail::format_float(o.dropout()));
  head_dim = o.embed_dim() / o.num_heads();
  const int64_t C = o.embed_dim();
  q_proj = register_module("q_proj", std::make_shared<Linear>(LinearOptions(C, C).bias(o.bias())));
  k_proj = register_module("k_proj", std::make_shared<Linear>(LinearOptions(C, C).bias(o.bias())));
  v_proj = register_module("v_proj", std::make_shared<Linear>(LinearOptions(C, C).bias(o.bias())));
  out_proj = register_module("out_proj", std::make_shared<Linear>(LinearOptions(C, C).bias(o.bias())));
  reset_parameters();
}

void MultiheadAttention::reset_parameters() {
  // Xavier-uniform over the packed (3C, C) in_proj_weight: fan_in = C, fan_out = 3C.
  const float C = static_cast<float>(options.embed_dim());
  const float bound = std::sqrt(6.0f / (C + 3.0f * C));
  for (const auto& p : {q_proj, k_proj, v_proj}) {
    init::uniform_(p->weight, -bound, bound);
    if (p->bias.defined()) init::zeros_(p->bias);
  }
  out_proj->reset_parameters();
}

AttentionOutput MultiheadAttention::forward(const Tensor& query, const Tensor& key,
                                            const Tensor& value, const AttentionForwardOptions& o) {
  const auto scope = this->scope();  // names this module in anomaly reports
  if (!query.defined() || !key.defined() || !value.defined())
    value_error("query, key and value must be defined");
  const Shape qs = query.shape(), ks = key.shape(), vs = value.shape();
  const int64_t C = options.embed_dim(), H = options.num_heads();
  const std::string all = "query " + to_string(qs) + ", key " + to_string(ks) + ", value " + to_string(vs);
  if (qs.size() != 3 || ks.size() != 3 || vs.size() != 3)
    shape_error("query, key and value must be 3-D (B, T, C) (batch first), got " + all);
  if (qs[2] != C || ks[2] != C || vs[2] != C)
    shape_error("query, key and value last dim must be embed_dim " + std::to_string(C) + ", got " + all);
  if (ks[0] != qs[0] || vs[0] != qs[0])
    shape_error("query, key and value must have the same batch size, got " + all);
  if (vs[1] != ks[1]) shape_error("key and value must have the same length, got " + all);
  const int64_t B = qs[0], Tq = qs[1], Tk = ks[1];
  if (B == 0 || Tq == 0 || Tk == 0) shape_error("empty inputs are not supported, got " + all);

  // Masks, checked here so errors name this module, then merged into one for the kernel.
  AttnMask mask;
  if (o.attn_mask().defined()) {
    Tensor m = o.attn_mask().values;
    const Shape ms = m.shape();
    const bool ok = (ms.size() == 2 && detail::broadcasts_to(ms, {Tq, Tk})) ||
                    (ms.size() == 3 && ms == Shape{B * H, Tq, Tk}) ||
                    (ms.size() == 4 && detail::broadcasts_to(ms, {B, H, Tq, Tk}));
    if (!ok)
      shape_error("attn_mask shape " + to_string(ms) + ", expected (Tq, Tk) = " + to_string({Tq, Tk}) +
                  ", (B·H, Tq, Tk) = " + to_string({B * H, Tq, Tk}) + " or 4-D broadcast to " +
                  to_string({B, H, Tq, Tk}));
    if (ms.size() == 3) m = reshape(m, {B, H, Tq, Tk});
    mask = o.attn_mask().is_boolean() ? AttnMask::boolean(m) : AttnMask::additive(m);
  }
  if (o.key_padding_mask().defined()) {
    const Shape ms = o.key_padding_mask().values.shape();
    if (ms != Shape{B, Tk})
      shape_error("key_padding_mask shape " + to_string(ms) + ", expected (B, Tk) = " + to_string({B, Tk}));
    const Tensor m = reshape(o.key_padding_mask().values, {B, 1, 1, Tk});
    const AttnMask kp = o.key_padding_mask().is_boolean() ? AttnMask::boolean(m) : AttnMask::additive(m);
    mask = mask.defined() ? AttnMask::additive(as_additive(mask) + as_additive(kp)) : kp;
  }

  detail::AttentionShape s;
  s.op = "multihead_attention";
  s.B = B;
  s.H = H;
  s.Tq = Tq;
  s.Tk = Tk;
  s.D = s.Dv = head_dim;
  s.out = {Tq * C, head_dim, C};
  s.out_shape = {B, Tq, C};
  s.lead = {B, H};
  AttentionOutput result;
  Tensor* weights = o.need_weights() ? &result.weights : nullptr;
  Tensor heads;
  const bool self = query.is_same(key) && key.is_same(value);
  const Tensor qkv = self && !impl::SeparateProjectionsScope::active() ? packed_projection(query) : Tensor();
  if (qkv.defined()) {  // (B, T, 3C): q, k and v of head h at columns h·Dh, C + h·Dh, 2C + h·Dh
    s.q = {Tq * 3 * C, head_dim, 3 * C, 0};
    s.k = {Tk * 3 * C, head_dim, 3 * C, C};
    s.v = {Tk * 3 * C, head_dim, 3 * C, 2 * C};
    s.dq = s.q;  // one gradient, in qkv's layout
    s.dk = s.k;
    s.dv = s.v;
    s.packed = true;
    heads = detail::attention(s, qkv, qkv, qkv, mask, o.causal(), options.dropout(), is_training(), weights);
  } else {
    const Tensor q = q_proj->forward(query), k = k_proj->forward(key), v = v_proj->forward(value);
    s.q = {Tq * C, head_dim, C};  // (B, Tq, C): head h at column h·Dh
    s.k = {Tk * C, head_dim, C};
    s.v = {Tk * C, head_dim, C};
    s.dq = s.q;  // the projections' gradients in the projections' own (B, T, C) layout
    s.dk = s.k;
    s.dv = s.v;
    heads = detail::attention(s, q, k, v, mask, o.causal(), options.dropout(), is_training(), weights);
  }
  result.output = out_proj->forward(heads);
  return result;
}

Tensor MultiheadAttention::forward(const Tensor& x, KVCache& cache, int64_t layer) {
  const auto scope = this->scope();  // names this module in anomaly reports
  if (!x.defined()) value_error("input is undefined");
  const Shape xs = x.shape();
  const int64_t C = options.embed_dim();
  if (xs.size() != 3 || xs[2] != C || xs[1] == 0)
    shape_error("cached forward: input must be (B, T, " + std::to_string(C) + ") with T >= 1, got " + to_string(xs));
  NoGradGuard no_grad;  // inference only
  const int64_t Tq = xs[1], M = cache.max_length();
  KVCache::Step step;
  {  // k and v live on in the cache only
    const Tensor k = k_proj->forward(x), v = v_proj->forward(x);
    step = cache.append(layer, *this, k, v);
  }
  const int64_t Tk = step.past + Tq;
  detail::AttentionShape s;
  s.op = "multihead_attention";
  s.B = xs[0];
  s.H = options.num_heads();
  s.Tq = Tq;
  s.Tk = Tk;
  s.D = s.Dv = head_dim;
  s.q = {Tq * C, head_dim, C};  // (B, Tq, C): head h at column h·Dh
  s.k = {M * C, head_dim, C};   // the cache's (B, M, C) buffers, first Tk rows
  s.v = {M * C, head_dim, C};
  s.out = {Tq * C, head_dim, C};
  s.dq = s.q;
  s.dk = s.k;
  s.dv = s.v;
  s.out_shape = {s.B, Tq, C};
  s.lead = {s.B, s.H};
  return out_proj->forward(detail::attention(s, q_proj->forward(x), step.k, step.v, step.mask, false,
                                             options.dropout(), is_training(), nullptr));
}

std::string MultiheadAttention::extra_repr() const {
  return "embed_dim=" + std::to_string(options.embed_dim()) + ", num_heads=" +
         std::to_string(options.num_heads()) + ", bias=" + (options.bias() ? "true" : "false") +
         ", dropout=" + detail::format_float(options.dropout());
}

std::string MultiheadAttention::signature() const {
  return std::to_string(options.embed_dim()) + ", " + std::to_string(options.num_heads()) + " heads";
}

// ---- FeedForward -----------------------------------------------------------------------------

FeedForward::FeedForward(const FeedForwardOptions& o) : Cloneable("FeedForward"), options(o) {
  if (o.d_model() <= 0 || o.d_ff() <= 0)
    value_error("d_model and d_ff must be positive, got d_model=" + std::to_string(o.d_model()) +
                ", d_ff=" + std::to_string(o.d_ff()));
  if (o.activation() != "gelu" && o.activation() != "relu")
    value_error("activation must be \"gelu\" or \"relu\", got \"" + o.activation() + "\"");
  if (!(o.dropout() >= 0.0f && o.dropout() <= 1.0f))
    value_error("dropout must be in [0, 1], got " + detail::format_float(o.dropout()));
  fc1 = register_module("fc1", std::make_shared<Linear>(o.d_model(), o.d_ff()));
  fc2 = register_module("fc2", std::make_shared<Linear>(o.d_ff(), o.d_model()));
}

Tensor FeedForward::forward(const Tensor& x) {
  const auto scope = this->scope();  // names this module in anomaly reports
  if (!is_grad_enabled()) return forward_no_grad(*this, x);
  // fc1 and the activation as one op: one pass over the (..., F) output after the GEMM, and
  // one backward. An input fc1 does not take goes through fc1's own forward, whose error
  // names it.
  if (!x.defined() || x.dim() == 0 || x.size(-1) != fc1->options.in_features()) fc1->forward(x);
  Tensor h;
  {
    const auto fc1_scope = fc1->scope();  // anomaly reports name fc1
    h = detail::linear_act(x, fc1->weight, fc1->bias,
                           options.activation() == "gelu" ? detail::Activation::Gelu
                                                          : detail::Activation::Relu);
  }
  return fc2->forward(dropout(h, options.dropout(), is_training()));
}

std::string FeedForward::extra_repr() const {
  return "d_model=" + std::to_string(options.d_model()) + ", d_ff=" + std::to_string(options.d_ff()) +
         ", activation=" + options.activation() + ", dropout=" + detail::format_float(options.dropout());
}

std::string FeedForward::signature() const {
  return std::to_string(options.d_model()) + "→" + std::to_string(options.d_ff()) + "→" +
         std::to_string(options.d_model());
}

// ---- TransformerBlock ------------------------------------------------------------------------

TransformerBlock::TransformerBlock(const TransformerBlockOptions& o)
    : Cloneable("TransformerBlock"), options(o) {
  // Checked here too, so that the error names this block rather than an unattached submodule.
  if (o.d_model() <= 0 || o.num_heads() <= 0 || o.d_model() % o.num_heads() != 0)
    value_error("d_model (" + std::to_string(o.d_model()) + ") must be a positive multiple of num_heads (" +
                std::to_string(o.num_heads()) + ")");
  if (!(o.dropout() >= 0.0f && o.dropout() <= 1.0f))
    value_error("dropout must be in [0, 1], got " + detail::format_float(o.dropout()));
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(LayerNormOptions({o.d_model()}).eps(o.layer_norm_eps())));
  attn = register_module("attn", std::make_shared<MultiheadAttention>(
                                     MultiheadAttentionOptions(o.d_model(), o.num_heads())
                                         .bias(o.bias())
                                         .dropout(o.dropout())));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(LayerNormOptions({o.d_model()}).eps(o.layer_norm_eps())));
  ffn = register_module("ffn", std::make_shared<FeedForward>(
                                   FeedForwardOptions(o.d_model(), o.d_ff())
                                       .activation(o.activation())
                                       .dropout(o.dropout())));
}

Tensor TransformerBlock::forward(const Tensor& x) { return forward(x, AttentionForwardOptions()); }

Tensor TransformerBlock::forward(const Tensor& x, const AttentionForwardOptions& attention) {
  const auto scope = this->scope();  // names this module in anomaly reports
  if (!x.defined()) value_error("input is undefined");
  const Shape s = x.shape();
  if (s.size() != 3 || s[2] != options.d_model())
    shape_error("input must be (B, T, " + std::to_string(options.d_model()) + "), got " + to_string(s));
  AttentionForwardOptions o = attention;
  o.need_weights(false);
  const bool train = is_training();
  Tensor branch;
  {
    const Tensor h = ln1->forward(x);
    branch = attn->forward(h, h, h, o).output;
  }
  if (!is_grad_enabled()) {  // inference: the sum in the branch's buffer (residual())
    const Tensor y = residual(x, branch, options.dropout(), train);
    branch = Tensor();
    return residual(y, ffn->forward(ln2->forward(y)), options.dropout(), train);
  }
  // y = x + dropout(branch) and ln2(y) in one pass (the dropout is drawn first, as before).
  AddLayerNorm yh;
  {
    const auto ln2_scope = ln2->scope();  // names ln2 in anomaly reports
    yh = add_layer_norm(x, dropout(branch, options.dropout(), train),
                        ln2->options.normalized_shape(), ln2->weight, ln2->bias, ln2->options.eps());
  }
  branch = Tensor();
  return residual(yh.sum, ffn->forward(yh.norm), options.dropout(), train);
}

Tensor TransformerBlock::forward(const Tensor& x, KVCache& cache, int64_t layer) {
  const auto scope = this->scope();  // names this module in anomaly reports
  if (!x.defined()) value_error("input is undefined");
  const Shape s = x.shape();
  if (s.size() != 3 || s[2] != options.d_model())
    shape_error("input must be (B, T, " + std::to_string(options.d_model()) + "), got " + to_string(s));
  NoGradGuard no_grad;  // inference only
  const bool train = is_training();
  const Tensor y = residual(x, attn->forward(ln1->forward(x), cache, layer), options.dropout(), train);
  const auto ffn_scope = ffn->scope();
  return residual(y, forward_no_grad(*ffn, ln2->forward(y)), options.dropout(), train);
}

std::string TransformerBlock::extra_repr() const {
  return "d_model=" + std::to_string(options.d_model()) + ", num_heads=" +
         std::to_string(options.num_heads()) + ", d_ff=" + std::to_string(options.d_ff()) +
         ", activation=" + options.activation() + ", dropout=" + detail::format_float(options.dropout());
}

std::string TransformerBlock::signature() const {
  return std::to_string(options.d_model()) + ", " + std::to_string(options.num_heads()) + " heads, d_ff " +
         std::to_string(options.d_ff());
}

}  // namespace nn
}  // namespace tg
