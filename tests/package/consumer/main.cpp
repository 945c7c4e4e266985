// Runs one tiny backward through an outside project's copy of tapegrad and checks it by hand.
// It also crosses the xtensor bridge (tapegrad/xtensor.h) both ways: that only links when
// this file is compiled with the library's own xsimd setting (XTENSOR_USE_XSIMD changes
// xt::xarray's allocator, so from_array/array would name different types otherwise).
#include <cmath>
#include <cstdio>

#include <tapegrad/tapegrad.h>
#include <tapegrad/xtensor.h>

#ifndef XTENSOR_USE_XSIMD
#error "tapegrad::tapegrad must bring XTENSOR_USE_XSIMD (xtensor::use_xsimd) to its users"
#endif

int main() {
  // L = sum(tanh(x W^T + b)),  W (2, 3), b (2), x (4, 3)
  tg::Array wa = {{0.1f, -0.2f, 0.3f}, {0.4f, 0.5f, -0.6f}};
  tg::Tensor w = tg::from_array(wa, true);
  tg::Tensor b = tg::tensor({0.05f, -0.05f}, true);
  tg::Tensor x = tg::tensor({1.f, 2.f, 3.f, -1.f, 0.f, 1.f, 0.5f, 0.5f, 0.5f, 2.f, -1.f, 0.f},
                            {4, 3});
  tg::Tensor loss = tg::sum(tg::tanh(tg::linear(x, w, b)));
  loss.backward();

  // dL/dW[o][i] = sum_n (1 - tanh²(z[n][o])) x[n][i]
  const tg::Array& gw = tg::array(w.grad());
  const auto xv = x.to_vector();
  double worst = 0;
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 3; ++i) {
      double expected = 0;
      for (int n = 0; n < 4; ++n) {
        double z = b.data()[o];
        for (int k = 0; k < 3; ++k) z += xv[n * 3 + k] * wa(o, k);
        expected += (1 - std::tanh(z) * std::tanh(z)) * xv[n * 3 + i];
      }
      worst = std::fmax(worst, std::fabs(expected - gw(o, i)));
    }
  std::printf("loss %.6f, max |dW - expected| %.2e\n", loss.item(), worst);
  if (!(worst < 1e-5)) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("consumer OK\n");
  return 0;
}
