// The consumers' check, by hand: for L = sum(tanh(x W^T + b)) with W (2, 3), b (2), x (4, 3),
// dL/dW[o][i] = sum_n (1 - tanh²(z[n][o])) x[n][i]. Prints the result line and returns the
// exit status (0 when every element of dW is within 1e-5).
#pragma once
#include <cmath>
#include <cstdio>
#include <vector>

inline int report_grad(float loss, const std::vector<float>& w, const std::vector<float>& b,
                       const std::vector<float>& x, const std::vector<float>& dw) {
  double worst = 0;
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 3; ++i) {
      double expected = 0;
      for (int n = 0; n < 4; ++n) {
        double z = b[o];
        for (int k = 0; k < 3; ++k) z += x[n * 3 + k] * w[o * 3 + k];
        expected += (1 - std::tanh(z) * std::tanh(z)) * x[n * 3 + i];
      }
      worst = std::fmax(worst, std::fabs(expected - dw[o * 3 + i]));
    }
  std::printf("loss %.6f, max |dW - expected| %.2e\n", loss, worst);
  if (!(worst < 1e-5)) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("consumer OK\n");
  return 0;
}
