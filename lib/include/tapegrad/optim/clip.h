#pragma once
// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_ (PyTorch 1.13).
// Parameters without a gradient are skipped.
#include <vector>

#include "tapegrad/tensor.h"

namespace tg {
namespace nn {
namespace utils {

/// Scales all gradients together so that their global norm is at most max_norm, and returns
/// that norm taken before clipping (as float32, like PyTorch).
///   total = ‖(‖g_1‖_p, …, ‖g_n‖_p)‖_p      (p = inf: the largest |g|)
///   g ← g · min(1, max_norm / (total + 1e-6))
/// A NaN or inf gradient makes the total NaN or inf; as in PyTorch the gradients are then
/// still scaled (by NaN, or by 0), unless error_if_nonfinite is set, in which case
/// tg::ValueError is thrown and nothing is changed. norm_type must be > 0 or inf.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

/// Clamps every gradient element to [-clip_value, clip_value] (NaN stays NaN).
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace utils
}  // namespace nn
}  // namespace tg
