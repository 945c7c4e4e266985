#pragma once
// The bridge to xtensor: the array behind a tensor, and tensors made from arrays.
// Including this header costs about a second of compile time per file; code that only
// needs values can use Tensor::data() instead.
#include <xtensor/xarray.hpp>

#include "tapegrad/memory.h"
#include "tapegrad/tensor.h"

namespace tg {

/// The storage type behind every tensor: float32, row-major, in tapegrad's buffers
/// (tapegrad/memory.h). An xt::xarray<float> converts to it (by a copy).
using Array = xt::xarray<float, xt::layout_type::row_major, BufferAllocator<float>>;

/// The tensor's values as an xtensor array (shared, mutable: writes change the tensor).
Array& array(const Tensor& t);
/// A new leaf tensor holding `values`.
Tensor from_array(Array values, bool requires_grad = false);

}  // namespace tg
