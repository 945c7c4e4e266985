#pragma once
// Library-internal: in-place kernels for the inference path (nn's FeedForward under
// NoGradGuard), where no backward will read the input, so the output may take its buffer.
#include "ops/common.h"

namespace tg {
namespace detail {

/// t ← gelu(t) (exact, or PyTorch's tanh form), in place: the same values as tg::gelu.
/// Refuses (tg::AutogradError) when grad mode is on.
void gelu_no_grad_(const Tensor& t, bool approximate);

}  // namespace detail
}  // namespace tg
