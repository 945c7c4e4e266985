#pragma once
// UnaryModule: the interface of every tensor -> tensor module (Linear, LayerNorm, Dropout, the
// activations, Sequential, ...), so that containers such as Sequential can hold any of them.
#include "tapegrad/nn/module.h"

namespace tg {
namespace nn {

class UnaryModule : public Module {
 public:
  using Module::Module;
  /// x -> y; the shapes are the implementing module's.
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
};

}  // namespace nn
}  // namespace tg
