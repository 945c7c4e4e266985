#pragma once
// More losses (float32), with PyTorch 1.13's definitions: cross_entropy, nll_loss and mse_loss
// are in ops.h. The pointwise losses take input and target of the SAME shape (PyTorch
// broadcasts them with a warning; tapegrad throws tg::ShapeError naming the loss and both
// shapes), differentiate both, and reduce as Reduction says (Mean over every element).
// weight and pos_weight are constants: one that requires a gradient is refused
// (tg::ValueError; PyTorch has no derivative for them either).
//
// Legend: N = batch, K = classes, d... = any further dims.
#include "tapegrad/arg.h"
#include "tapegrad/ops.h"

namespace tg {

struct BCELossOptions {
  /// Multiplies each element's loss; broadcast to the input's shape.
  TG_ARG(Tensor, weight);
  TG_ARG(Reduction, reduction) = Reduction::Mean;
};

/// -w · (t · log(x) + (1 - t) · log(1 - x)), each log clamped at -100 as in PyTorch.
/// input holds probabilities: a value outside [0, 1] (or NaN) is tg::ValueError.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const BCELossOptions& options = BCELossOptions());

struct BCEWithLogitsLossOptions {
  /// Multiplies each element's loss; broadcast to the input's shape.
  TG_ARG(Tensor, weight);
  TG_ARG(Reduction, reduction) = Reduction::Mean;
  /// The weight of positive examples, broadcast to the input's shape: (K) for input (N, K).
  TG_ARG(Tensor, pos_weight);
};

/// binary_cross_entropy(sigmoid(x), t), computed from the logits as
/// w · ((1 - t) · x + (1 + (p - 1) · t) · softplus(-x)), finite for any finite logit.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsLossOptions& options = BCEWithLogitsLossOptions());

struct SmoothL1LossOptions {
  TG_ARG(Reduction, reduction) = Reduction::Mean;
  /// Where the loss turns from quadratic to linear; >= 0 (0 gives l1_loss).
  TG_ARG(float, beta) = 1.0f;
};

/// d = x - t:  ½d²/β where |d| < β, else |d| - ½β.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      const SmoothL1LossOptions& options = SmoothL1LossOptions());

struct HuberLossOptions {
  TG_ARG(Reduction, reduction) = Reduction::Mean;
  /// Where the loss turns from quadratic to linear; > 0.
  TG_ARG(float, delta) = 1.0f;
};

/// d = x - t:  ½d² where |d| < δ, else δ(|d| - ½δ)  (= δ · smooth_l1 with β = δ).
Tensor huber_loss(const Tensor& input, const Tensor& target,
                  const HuberLossOptions& options = HuberLossOptions());

/// |x - t|
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

/// kl_div's reductions: Reduction's three, and BatchMean, the sum divided by the batch size
/// (input's first dim), which is the true KL divergence per example. Mean (the default, as
/// in PyTorch) divides by every element.
enum class KLDivReduction { None, BatchMean, Sum, Mean };

struct KLDivLossOptions {
  TG_ARG(KLDivReduction, reduction) = KLDivReduction::Mean;
  /// The target holds log-probabilities instead of probabilities.
  TG_ARG(bool, log_target) = false;
};

/// input holds log-probabilities x:  t · (log t - x), 0 where t = 0 (log_target: eᵗ (t - x)).
Tensor kl_div(const Tensor& input, const Tensor& target,
              const KLDivLossOptions& options = KLDivLossOptions());

/// cross_entropy with class probabilities as targets: logits (N, K) or (N, K, d...) or (K),
/// target of the same shape. loss = -Σ_k w_k q_k log_softmax(x)_k over the class dim, with
/// q = (1 - ε) t + ε / K under label_smoothing ε and w = options.weight() (K) or 1. Mean
/// divides by N · prod(d) (not by the weights, as PyTorch). ignore_index must stay negative
/// (it means nothing for probabilities). Both logits and target are differentiated.
Tensor cross_entropy_probs(const Tensor& logits, const Tensor& target,
                           const CrossEntropyOptions& options = CrossEntropyOptions());
/// cross_entropy(logits, target) (tapegrad/ops/integer.h) calls it for a float32 target.

}  // namespace tg
