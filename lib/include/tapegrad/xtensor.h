#pragma once
// The bridge to xtensor: the array behind a tensor, and tensors made from arrays.
// Including this header costs about a second of compile time per file; code that only
// needs values can use Tensor::data() instead.
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>

#include "tapegrad/memory.h"
#include "tapegrad/tensor.h"

namespace tg {

/// The storage type behind every tensor: float32, row-major, in tapegrad's buffers
/// (tapegrad/memory.h). An xt::xarray<float> converts to it (by a copy).
using Array = xt::xarray<float, xt::layout_type::row_major, BufferAllocator<float>>;

/// A window on values that a tensor owns: an xtensor adaptor, row-major, that shares them.
using ArrayView = xt::xarray_adaptor<xt::xbuffer_adaptor<float*, xt::no_ownership>,
                                     xt::layout_type::row_major, Array::shape_type>;

/// The tensor's values as an xtensor expression (shared, mutable: writes change the tensor;
/// its shape cannot change). A view of part of a storage, or a strided one, has none: it
/// throws tg::ValueError naming contiguous(). An Array made from it is a copy.
ArrayView& array(const Tensor& t);
/// A new leaf tensor holding `values`.
Tensor from_array(Array values, bool requires_grad = false);

}  // namespace tg
