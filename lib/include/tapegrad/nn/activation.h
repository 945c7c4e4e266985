#pragma once
// More activation modules, each the module form of its op in tapegrad/ops/pointwise.h:
// SiLU, LeakyReLU, ELU, Softplus. (...) -> (...) for all. (ReLU, Tanh, Sigmoid, GELU: layers.h.)
#include <string>

#include "tapegrad/arg.h"
#include "tapegrad/nn/unary.h"

namespace tg {
namespace nn {

/// x · sigmoid(x).
class SiLU : public UnaryModule {
 public:
  SiLU() : UnaryModule("SiLU") {}
  Tensor forward(const Tensor& x) override;
};

struct LeakyReLUOptions {
  /// The slope where x <= 0.
  TG_ARG(float, negative_slope) = 0.01f;
};

/// x where x > 0, negative_slope · x elsewhere.
class LeakyReLU : public UnaryModule {
 public:
  explicit LeakyReLU(const LeakyReLUOptions& options = LeakyReLUOptions());
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  LeakyReLUOptions options;
};

struct ELUOptions {
  /// The value approached as x -> -inf is -alpha.
  TG_ARG(float, alpha) = 1.0f;
};

/// x where x > 0, alpha · (eˣ - 1) elsewhere.
class ELU : public UnaryModule {
 public:
  explicit ELU(const ELUOptions& options = ELUOptions());
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  ELUOptions options;
};

struct SoftplusOptions {
  /// > 0 (tg::ValueError naming the module otherwise).
  TG_ARG(float, beta) = 1.0f;
  /// Above beta · x > threshold the module returns x itself.
  TG_ARG(float, threshold) = 20.0f;
};

/// log(1 + e^(βx)) / β (x where βx > threshold).
class Softplus : public UnaryModule {
 public:
  explicit Softplus(const SoftplusOptions& options = SoftplusOptions());
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  SoftplusOptions options;
};

}  // namespace nn
}  // namespace tg
