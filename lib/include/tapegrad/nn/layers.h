#pragma once
// The simple layers: Embedding, LayerNorm, Dropout, the activation modules, and the
// containers Sequential and ModuleList.
//
// Legend: S = any shape of ids, V = vocabulary size, C = channels/features, N... = the
// trailing normalized_shape.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tapegrad/arg.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/nn/unary.h"

namespace tg {
namespace nn {

// ---- Embedding -------------------------------------------------------------------------------

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  TG_ARG(int64_t, num_embeddings);
  TG_ARG(int64_t, embedding_dim);
  /// The row that stays zero and gets no gradient; negative counts from the end, as in PyTorch.
  TG_ARG(std::optional<int64_t>, padding_idx);
};

/// A lookup table: weight (V, C), initialised N(0, 1) with the padding row zeroed.
class Embedding : public Module {
 public:
  explicit Embedding(const EmbeddingOptions& options);
  Embedding(int64_t num_embeddings, int64_t embedding_dim)
      : Embedding(EmbeddingOptions(num_embeddings, embedding_dim)) {}

  /// ids (S...) -> (S..., C). An id outside [0, V) throws tg::IndexError naming this module.
  Tensor forward(const Indices& ids) const;
  Tensor operator()(const Indices& ids) const { return forward(ids); }
  /// The same with an int64 tensor of ids (tg::TypeError for another dtype).
  Tensor forward(const Tensor& ids) const;
  Tensor operator()(const Tensor& ids) const { return forward(ids); }
  /// Re-draws the weight from N(0, 1) and zeroes the padding row.
  void reset_parameters();

  std::string extra_repr() const override;
  std::string signature() const override;

  EmbeddingOptions options;  // padding_idx normalised to [0, V) (or empty)
  Tensor weight;             // (V, C)
};

// ---- LayerNorm -------------------------------------------------------------------------------

struct LayerNormOptions {
  /// The trailing dims to normalise over, e.g. {C}.
  LayerNormOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}
  TG_ARG(Shape, normalized_shape);
  TG_ARG(float, eps) = 1e-5f;
  /// Learn a weight and a bias (N...).
  TG_ARG(bool, elementwise_affine) = true;
};

/// y = (x - mean) / √(var + eps) · weight + bias over the trailing dims (biased variance).
class LayerNorm : public UnaryModule {
 public:
  explicit LayerNorm(const LayerNormOptions& options);
  explicit LayerNorm(int64_t normalized_dim) : LayerNorm(LayerNormOptions({normalized_dim})) {}

  /// (..., N...) -> (..., N...)
  Tensor forward(const Tensor& x) override;
  /// weight = 1, bias = 0.
  void reset_parameters();

  std::string extra_repr() const override;
  std::string signature() const override;

  LayerNormOptions options;
  Tensor weight;  // (N...), undefined without elementwise_affine
  Tensor bias;    // (N...), undefined without elementwise_affine
};

// ---- Dropout ---------------------------------------------------------------------------------

struct DropoutOptions {
  DropoutOptions(float p = 0.5f) : p_(p) {}
  /// The probability of zeroing an element.
  TG_ARG(float, p);
};

/// In training, zeroes each element with probability p and scales the rest by 1/(1-p);
/// the identity in eval mode. p must be in [0, 1] (tg::ValueError otherwise).
class Dropout : public UnaryModule {
 public:
  explicit Dropout(const DropoutOptions& options = DropoutOptions());
  explicit Dropout(float p) : Dropout(DropoutOptions(p)) {}

  /// (...) -> (...)
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  DropoutOptions options;
};

// ---- activations -----------------------------------------------------------------------------

/// max(x, 0). (...) -> (...)
class ReLU : public UnaryModule {
 public:
  ReLU() : UnaryModule("ReLU") {}
  Tensor forward(const Tensor& x) override;
};

/// tanh(x). (...) -> (...)
class Tanh : public UnaryModule {
 public:
  Tanh() : UnaryModule("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

/// 1 / (1 + e^-x). (...) -> (...)
class Sigmoid : public UnaryModule {
 public:
  Sigmoid() : UnaryModule("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};

struct GELUOptions {
  /// "none" (exact, with erf; the default) or "tanh" (PyTorch's tanh approximation).
  TG_ARG(std::string, approximate) = "none";
};

/// x · Φ(x). (...) -> (...)
class GELU : public UnaryModule {
 public:
  explicit GELU(const GELUOptions& options = GELUOptions());
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  GELUOptions options;
};

// ---- containers ------------------------------------------------------------------------------

/// What Sequential and ModuleList share: modules kept in order, each registered under a name
/// of its own, with bounds-checked and typed access. Item is the type they all have.
template <class Base, class Item>
class ModuleSequence : public Base {
 public:
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  /// The i-th module; tg::IndexError if out of range.
  std::shared_ptr<Item> operator[](size_t i) const {
    this->check_index(i, items_.size());
    return items_[i];
  }
  /// The i-th module as an M; tg::ValueError if it is not one.
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[i]);
    if (!m) this->type_mismatch(i, *items_[i]);
    return m;
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 protected:
  explicit ModuleSequence(std::string type_name) : Base(std::move(type_name)) {}
  /// Registers `module` under `name` and appends it.
  template <class M>
  std::shared_ptr<M> append(const std::string& name, std::shared_ptr<M> module) {
    this->register_module(name, module);
    items_.push_back(module);
    return module;
  }

  std::vector<std::shared_ptr<Item>> items_;
};

/// Tensor -> tensor modules applied in order, registered as "0", "1", ... (as in PyTorch), or
/// under names of your own. Empty, it is the identity.
///
///   auto mlp = std::make_shared<Sequential>(std::make_shared<Linear>(784, 256),
///                                           std::make_shared<ReLU>(),
///                                           std::make_shared<Linear>(256, 10));
class Sequential : public ModuleSequence<UnaryModule, UnaryModule> {
 public:
  Sequential() : ModuleSequence("Sequential") {}
  template <class... M>
  explicit Sequential(std::shared_ptr<M>... modules) : ModuleSequence("Sequential") {
    (push_back(std::move(modules)), ...);
  }

  /// Appends under the name "<size()>" and returns the module.
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    return push_back(std::to_string(size()), std::move(module));
  }
  /// Appends under a name of your own.
  template <class M>
  std::shared_ptr<M> push_back(const std::string& name, std::shared_ptr<M> module) {
    static_assert(std::is_base_of<UnaryModule, M>::value,
                  "Sequential holds tensor -> tensor modules (derived from nn::UnaryModule)");
    return append(name, std::move(module));
  }

  /// x -> modules[n-1](...modules[0](x))
  Tensor forward(const Tensor& x) override;
};

/// A list of modules of any kind, registered as "0", "1", ... so their parameters are named
/// "0.weight", "1.weight", ... It has no forward: the owner loops over it.
class ModuleList : public ModuleSequence<Module, Module> {
 public:
  ModuleList() : ModuleSequence("ModuleList") {}
  template <class... M>
  explicit ModuleList(std::shared_ptr<M>... modules) : ModuleSequence("ModuleList") {
    (push_back(std::move(modules)), ...);
  }

  /// Appends under the name "<size()>" and returns the module.
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    return append(std::to_string(size()), std::move(module));
  }
};

}  // namespace nn
}  // namespace tg
