// Runs one tiny backward through an outside project's copy of tapegrad and checks it by hand,
// through the public headers only: no xtensor, no cereal, no architecture flag needed (the
// package test checks that this file's compile line and dependencies have none of them).
#include <tapegrad/tapegrad.h>

#include "expected.h"

int main() {
  // L = sum(tanh(x W^T + b)),  W (2, 3), b (2), x (4, 3)
  tg::Tensor w = tg::tensor({0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f}, {2, 3}, true);
  tg::Tensor b = tg::tensor({0.05f, -0.05f}, true);
  tg::Tensor x = tg::tensor({1.f, 2.f, 3.f, -1.f, 0.f, 1.f, 0.5f, 0.5f, 0.5f, 2.f, -1.f, 0.f},
                            {4, 3});
  tg::Tensor loss = tg::sum(tg::tanh(tg::linear(x, w, b)));
  loss.backward();
  return report_grad(loss.item(), w.to_vector(), b.to_vector(), x.to_vector(),
                     w.grad().to_vector());
}
