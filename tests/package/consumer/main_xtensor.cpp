// The xtensor bridge from an outside project: one tiny backward, checked by hand, crossing
// tapegrad/xtensor.h both ways. That only links when this file is compiled with the library's
// own xsimd setting (XTENSOR_USE_XSIMD changes xt::xarray's allocator, so from_array/array
// would name different types otherwise): tapegrad::xtensor brings it.
#include <tapegrad/tapegrad.h>
#include <tapegrad/xtensor.h>

#include "expected.h"

#ifndef XTENSOR_USE_XSIMD
#error "tapegrad::xtensor must bring XTENSOR_USE_XSIMD (xtensor::use_xsimd) to its users"
#endif

int main() {
  tg::Array wa = {{0.1f, -0.2f, 0.3f}, {0.4f, 0.5f, -0.6f}};
  tg::Tensor w = tg::from_array(wa, true);
  tg::Tensor b = tg::tensor({0.05f, -0.05f}, true);
  tg::Tensor x = tg::tensor({1.f, 2.f, 3.f, -1.f, 0.f, 1.f, 0.5f, 0.5f, 0.5f, 2.f, -1.f, 0.f},
                            {4, 3});
  tg::Tensor loss = tg::sum(tg::tanh(tg::linear(x, w, b)));
  loss.backward();
  const tg::Array& gw = tg::array(w.grad());
  return report_grad(loss.item(), std::vector<float>(wa.begin(), wa.end()), b.to_vector(),
                     x.to_vector(), std::vector<float>(gw.begin(), gw.end()));
}
