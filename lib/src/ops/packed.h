#pragma once
// Library-internal: a packed copy of several parameters (self-attention's q, k and v weights
// as one (3C, C) matrix), kept by its owner between calls and recorded on the tape as a
// function of the parts at each use, so that their gradients are what they would be without it.
#include <memory>
#include <vector>

#include "ops/common.h"

namespace tg {
namespace detail {

/// The parts (contiguous or not, float32, equal trailing dims) stacked along dim 0 into a fresh
/// storage: cat(parts, 0)'s values, without a history.
std::shared_ptr<Storage> pack_rows(const std::vector<Tensor>& parts);

/// Whether `packed` (made by pack_rows) still holds the parts' values, bit for bit: what an
/// owner checks before reusing it, as a raw pointer (data_ptr()) may have written a part
/// without a version bump.
bool still_packed(const Storage& packed, const std::vector<Tensor>& parts);

/// A tensor over `packed` (what pack_rows made of these parts, unchanged since), recorded as a
/// function of the parts: cat(parts, 0) without the copy. Its gradient's row blocks go back to
/// the parts.
Tensor packed_rows(const std::shared_ptr<Storage>& packed, const std::vector<Tensor>& parts);

}  // namespace detail
}  // namespace tg
