#pragma once
// What init.cpp computes without drawing, for tests that feed PyTorch's own random matrix.
#include <cstdint>
#include <vector>

namespace tg {
namespace nn {
namespace init {
namespace impl {

/// orthogonal_ of a (rows, cols) matrix whose N(0, 1) draw was `normal` (row-major): writes
/// gain · Q (rows, cols) to out.
void orthogonal_from_normal(const std::vector<float>& normal, int64_t rows, int64_t cols,
                            double gain, float* out);

}  // namespace impl
}  // namespace init
}  // namespace nn
}  // namespace tg
