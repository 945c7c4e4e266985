// The ops' door to the vector kernels (ops/vec_ops.h).
#include "ops/vec_ops.h"

#include <algorithm>

#include <xtensor/xadapt.hpp>
#include <xtensor/xnoalias.hpp>

#include "backend/parallel.h"

namespace tg {
namespace detail {

namespace {

size_t numel(const XShape& s) {
  size_t n = 1;
  for (size_t d : s) n *= d;
  return n;
}

/// numpy's broadcast of two shapes that are known to broadcast.
XShape broadcast(const XShape& a, const XShape& b) {
  const size_t rank = std::max(a.size(), b.size());
  XShape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const size_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const size_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

/// Whether `s` repeats whole inside `out`: without its leading 1s, it is out's trailing dims
/// (so its elements, in order, recur every numel(s) elements of out). A scalar always does.
bool repeats_in(const XShape& s, const XShape& out) {
  size_t lead = 0;
  while (lead < s.size() && s[lead] == 1) ++lead;
  const size_t k = s.size() - lead;
  if (k > out.size()) return false;
  return std::equal(s.begin() + static_cast<long>(lead), s.end(), out.end() - static_cast<long>(k));
}

View adapt(const float* p, const XShape& s) { return view_over(const_cast<float*>(p), s, numel(s)); }

template <class A, class B>
Array xt_binary(vec::Binary op, const A& a, const B& b) {
  switch (op) {
    case vec::Binary::Add: return a + b;
    case vec::Binary::Sub: return a - b;
    case vec::Binary::Mul: return a * b;
    case vec::Binary::Div: return a / b;
  }
  return Array();
}

}  // namespace

Array binary(vec::Binary op, const float* a, const XShape& sa, const float* b, const XShape& sb) {
  const XShape out = sa == sb ? sa : broadcast(sa, sb);
  if (!repeats_in(sa, out) || !repeats_in(sb, out))  // e.g. (B, 1) * (1, C): xtensor
    return xt_binary(op, adapt(a, sa), adapt(b, sb));
  Array y = Array::from_shape(out);
  vec::kernels().binary(op, a, numel(sa), b, numel(sb), y.data(), y.size());
  return y;
}

Array binary(vec::Binary op, const View& a, float s) {
  Array y = Array::from_shape(a.shape());
  vec::kernels().binary(op, a.data(), a.size(), &s, 1, y.data(), y.size());
  return y;
}

void binary_(vec::Binary op, Array& g, const float* d, const XShape& sd) {
  if (repeats_in(sd, g.shape())) {
    vec::kernels().binary(op, g.data(), g.size(), d, numel(sd), g.data(), g.size());
    return;
  }
  const View vd = adapt(d, sd);
  switch (op) {
    case vec::Binary::Add: xt::noalias(g) += vd; break;
    case vec::Binary::Sub: xt::noalias(g) -= vd; break;
    case vec::Binary::Mul: xt::noalias(g) *= vd; break;
    case vec::Binary::Div: xt::noalias(g) /= vd; break;
  }
}

Array unary(void (*f)(const float*, float*, size_t), const View& x) {
  Array y = Array::from_shape(x.shape());
  f(x.data(), y.data(), y.size());
  return y;
}

Array copy_of(const Array& a) {
  Array y = Array::from_shape(a.shape());
  const float* src = a.data();
  float* dst = y.data();
  for_range(static_cast<int64_t>(a.size()), kGrain, [src, dst](int64_t b, int64_t e) {
    std::copy(src + b, src + e, dst + b);
  });
  return y;
}

}  // namespace detail
}  // namespace tg
