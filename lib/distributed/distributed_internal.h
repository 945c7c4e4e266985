#pragma once
// Shared between the files of lib/distributed (not installed).
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/tensor.h"

namespace tg {
namespace distributed {
namespace detail {

/// Throws tg::DistributedError on every rank unless every rank has the same names and shapes
/// as `root`, in the same order; the message starts "distributed: <what> differ from rank
/// <root>'s on rank(s) ..." and, on a differing rank, names the first difference.
void check_same_layout(const std::vector<std::pair<std::string, Tensor>>& entries, int root,
                       const std::string& what);

}  // namespace detail
}  // namespace distributed
}  // namespace tg
