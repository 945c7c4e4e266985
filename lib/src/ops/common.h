#pragma once
// Library-internal, the ops layer: what every op's source includes. The layers below (the
// storage, the shape checks, the tape's record()) and the helpers ops share: broadcasting,
// axis splits and shape errors. Not installed.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "backend/gemm.h"
#include "core/shape.h"
#include "core/storage.h"
#include "tapegrad/ops.h"

namespace tg {
namespace detail {

/// What an op whose kernel reads val() calls on each tensor input first: the input itself if
/// it is contiguous (or undefined), else its contiguous copy, kept in `copy` and recorded, so
/// that the gradient flows back through the view.
inline const Tensor& dense(const Tensor& input, Tensor& copy) {
  if (!input.defined() || input.impl()->contiguous()) return input;
  copy = input.contiguous();
  return copy;
}

/// How a GEMM names an operand to the GPU's cache of device copies (backend/gemm.h): by its
/// storage and a stamp of every write to it (versioned writes and raw hand-outs), so a copy is
/// reused only while the values are unchanged. Only leaves are named (weights, constant
/// inputs: what a product sees again); an activation, or any operand while products stay on
/// the CPU, gets none.
inline gemm::OperandId operand_id(Storage& s) {
  if (!gemm::device_cache_active()) return {};
  s.on_device.store(true, std::memory_order_relaxed);  // its death must drop the copies
  const uint64_t raw = s.raw_access.load(std::memory_order_relaxed);
  return {s.id, (static_cast<uint64_t>(version_of(s)) << 32) | raw};
}
inline gemm::OperandId operand_id(const TensorImpl& t) {
  return t.grad_fn ? gemm::OperandId{} : operand_id(*t.storage);
}

/// t's elements (any dtype) as T (float, int64_t, or uint8_t: != 0), in row-major order of
/// the shape `target`, to which t broadcasts (the caller has checked).
template <class T>
std::vector<T> broadcast_values(const Tensor& t, const Shape& target);

/// numpy broadcasting of two shapes; throws ShapeError naming the op.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// A row-major shape seen as (outer, n, inner) around one axis: element (o, i, j) sits at
/// (o * n + i) * inner + j. Most axis-wise kernels loop over this.
struct AxisSplit {
  size_t outer = 1, n = 1, inner = 1;
};
AxisSplit split_at(const Shape& shape, size_t axis);
[[noreturn]] void shape_error(const char* op, const std::string& what);

/// The strides, in elements, of a row-major block of shape `shape` whose elements are
/// `inner` apart, seen through the broadcast shape `target` (aligned at the right): 0 along
/// the dims it repeats over. The caller has checked that `shape` broadcasts to `target`.
std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& target, int64_t inner = 1);
/// The offset of every index of `dims`, in row-major order, under `strides`: the odometer
/// that walks broadcast batch dims (matmul's operands, attention's masks).
std::vector<int64_t> strided_offsets(const Shape& dims, const std::vector<int64_t>& strides);

/// How a GEMM reads a (rows, cols) matrix whose elements are s_row and s_col apart (strides,
/// in elements): as stored (trans = false: element (r, c) at r·ld + c) or through its
/// transpose flag (element (r, c) at c·ld + r). ok = false when neither fits: a matrix that is
/// not contiguous along either dim, or whose rows overlap (an expand). To read the matrix
/// transposed, flip `trans` and keep the pointer and ld.
struct MatrixLayout {
  bool ok = false, trans = false;
  int64_t ld = 0;
};
MatrixLayout matrix_layout(int64_t rows, int64_t cols, int64_t s_row, int64_t s_col);
/// A tensor seen as one matrix: its leading dims as rows (they must step evenly through
/// memory), its last dim as columns. A 0-d tensor is not a matrix (ok = false).
MatrixLayout as_matrix(const TensorImpl& t);

/// The backward of softmax (log = false) and log_softmax (log = true) along the axis of `s`,
/// from their output y and its gradient g:
///   softmax      dx = y (g - Σ g y)          log_softmax  dx = g - e^y Σ g
Array softmax_backward(const View& y, const Array& g, const AxisSplit& s, bool log);

}  // namespace detail
}  // namespace tg
