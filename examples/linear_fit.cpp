// The first demo: recover a known W and b by gradient descent on y = x Wᵀ + b.
//
//   x (N, 3) random, y = x W_trueᵀ + b_true + small noise  ->  fit W (2, 3), b (2)
#include <cstdio>

#include "tapegrad/tapegrad.h"

int main() {
  tg::manual_seed(0);
  const tg::Tensor w_true = tg::tensor({{0.1f, 0.2f, 0.3f}, {0.4f, 0.5f, 0.6f}});
  const tg::Tensor b_true = tg::tensor({0.1f, 0.2f});
  const tg::Tensor x = tg::randn({256, 3});
  const tg::Tensor y = tg::linear(x, w_true, b_true) + tg::randn({256, 2}) * 0.01f;

  const tg::Tensor w = tg::zeros({2, 3}, true), b = tg::zeros({2}, true);
  const float lr = 0.1f;
  for (int step = 0; step <= 200; ++step) {
    const tg::Tensor loss = tg::mse_loss(tg::linear(x, w, b), y);
    w.zero_grad();
    b.zero_grad();
    loss.backward();
    {
      tg::NoGradGuard no_grad;  // plain SGD on the raw values
      for (auto [p, g] : {std::pair{w, w.grad()}, std::pair{b, b.grad()}})
        for (int64_t i = 0; i < p.numel(); ++i) p.data_ptr()[i] -= lr * g.data_ptr()[i];
    }
    if (step % 50 == 0) std::printf("step %3d  loss %.6f\n", step, loss.item());
  }
  std::printf("\n        recovered                    true\n");
  for (int r = 0; r < 2; ++r) {
    std::printf("W[%d]  ", r);
    for (int c = 0; c < 3; ++c) std::printf("%7.4f ", w.data()(r, c));
    std::printf("   ");
    for (int c = 0; c < 3; ++c) std::printf("%7.4f ", w_true.data()(r, c));
    std::printf("\n");
  }
  std::printf("b     %7.4f %7.4f            %7.4f %7.4f\n", b.data()[0], b.data()[1],
              b_true.data()[0], b_true.data()[1]);
  return 0;
}
