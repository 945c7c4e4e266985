#pragma once
// The simple layers: Embedding, LayerNorm, Dropout, Identity, Flatten, the activation and
// softmax modules, and the containers Sequential and ModuleList.
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
#include "tapegrad/nn/cloneable.h"
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

struct EmbeddingFromPretrainedOptions {
  /// Keep the weight fixed (requires_grad false), as PyTorch's default.
  TG_ARG(bool, freeze) = true;
  /// The row that gets no gradient (its values are kept as given); negative counts from the end.
  TG_ARG(std::optional<int64_t>, padding_idx);
};

/// A lookup table: weight (V, C), initialised N(0, 1) with the padding row zeroed.
class Embedding : public Cloneable<Embedding> {
 public:
  explicit Embedding(const EmbeddingOptions& options);
  Embedding(int64_t num_embeddings, int64_t embedding_dim)
      : Embedding(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  /// An Embedding whose weight is `embeddings` (V, C) (sharing its storage, as PyTorch);
  /// tg::ShapeError unless 2-D. Draws no random numbers.
  static std::shared_ptr<Embedding> from_pretrained(
      const Tensor& embeddings,
      const EmbeddingFromPretrainedOptions& options = EmbeddingFromPretrainedOptions());

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

 private:
  Embedding(const EmbeddingOptions& options, const Tensor& pretrained);
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
class LayerNorm : public Cloneable<LayerNorm, UnaryModule> {
 public:
  explicit LayerNorm(const LayerNormOptions& options);
  explicit LayerNorm(int64_t normalized_dim) : LayerNorm(LayerNormOptions({normalized_dim})) {}
  /// LayerNorm({3, 4}): over the last two dims.
  explicit LayerNorm(Shape normalized_shape) : LayerNorm(LayerNormOptions(std::move(normalized_shape))) {}

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
class Dropout : public Cloneable<Dropout, UnaryModule> {
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
class ReLU : public Cloneable<ReLU, UnaryModule> {
 public:
  ReLU() : Cloneable("ReLU") {}
  Tensor forward(const Tensor& x) override;
};

/// tanh(x). (...) -> (...)
class Tanh : public Cloneable<Tanh, UnaryModule> {
 public:
  Tanh() : Cloneable("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

/// 1 / (1 + e^-x). (...) -> (...)
class Sigmoid : public Cloneable<Sigmoid, UnaryModule> {
 public:
  Sigmoid() : Cloneable("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};

struct GELUOptions {
  /// "none" (exact, with erf; the default) or "tanh" (PyTorch's tanh approximation).
  TG_ARG(std::string, approximate) = "none";
};

/// x · Φ(x). (...) -> (...)
class GELU : public Cloneable<GELU, UnaryModule> {
 public:
  explicit GELU(const GELUOptions& options = GELUOptions());
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  GELUOptions options;
};

// ---- softmax, shapes ------------------------------------------------------------------------

struct SoftmaxOptions {
  SoftmaxOptions(int64_t dim) : dim_(dim) {}  // NOLINT: implicit, so Softmax(1) reads well
  /// The dim whose entries sum to 1; negative counts from the end.
  TG_ARG(int64_t, dim);
};
using LogSoftmaxOptions = SoftmaxOptions;

/// exp(x_i) / Σ_j exp(x_j) along dim. (...) -> (...)
class Softmax : public Cloneable<Softmax, UnaryModule> {
 public:
  explicit Softmax(const SoftmaxOptions& options);
  explicit Softmax(int64_t dim) : Softmax(SoftmaxOptions(dim)) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  SoftmaxOptions options;
};

/// x_i - log Σ_j exp(x_j) along dim. (...) -> (...)
class LogSoftmax : public Cloneable<LogSoftmax, UnaryModule> {
 public:
  explicit LogSoftmax(const LogSoftmaxOptions& options);
  explicit LogSoftmax(int64_t dim) : LogSoftmax(LogSoftmaxOptions(dim)) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  LogSoftmaxOptions options;
};

/// Returns its input (the same tensor). (...) -> (...)
class Identity : public Cloneable<Identity, UnaryModule> {
 public:
  Identity() : Cloneable("Identity") {}
  Tensor forward(const Tensor& x) override;
};

struct FlattenOptions {
  /// PyTorch's defaults: every dim but the batch dim.
  TG_ARG(int64_t, start_dim) = 1;
  TG_ARG(int64_t, end_dim) = -1;
};

/// Merges dims start_dim..end_dim (negative counts from the end) into one:
/// (B, C, H, W) -> (B, C·H·W) with the defaults. A view when it can be, as tg::flatten.
class Flatten : public Cloneable<Flatten, UnaryModule> {
 public:
  explicit Flatten(const FlattenOptions& options = FlattenOptions());
  Flatten(int64_t start_dim, int64_t end_dim = -1)
      : Flatten(FlattenOptions().start_dim(start_dim).end_dim(end_dim)) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  FlattenOptions options;
};

// ---- containers ------------------------------------------------------------------------------

/// What Sequential and ModuleList share: modules kept in order, each registered under a name
/// of its own, with bounds-checked and typed access. Item is the type they all have; items
/// are callable holders (list[i](x)).
template <class Base, class Item>
class ModuleSequence : public Base {
 public:
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  /// The i-th module; tg::IndexError if out of range.
  ModuleHolder<Item> operator[](size_t i) const {
    this->check_index(i, items_.size());
    return items_[i];
  }
  /// The i-th module as an M; tg::ValueError if it is not one.
  template <class M>
  ModuleHolder<M> at(size_t i) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[i].ptr());
    if (!m) this->type_mismatch(i, *items_[i]);
    return m;
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 protected:
  explicit ModuleSequence(std::string type_name) : Base(std::move(type_name)) {}
  /// Registers `module` under `name` and appends it.
  template <class M>
  ModuleHolder<M> append(const std::string& name, std::shared_ptr<M> module) {
    this->register_module(name, module);
    items_.push_back(module);
    return module;
  }
  /// Copies of every item (item->clone()) under the same names, into `copy`.
  template <class Sequence>
  std::shared_ptr<Sequence> clone_into(std::shared_ptr<Sequence> copy) const {
    copy->train(this->is_training());  // while empty: the items keep their own flags
    const auto names = this->named_children();
    for (size_t i = 0; i < items_.size(); ++i)
      copy->append(names[i].first, std::dynamic_pointer_cast<Item>(items_[i]->clone()));
    return copy;
  }

  std::vector<ModuleHolder<Item>> items_;
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
  ModuleHolder<M> push_back(std::shared_ptr<M> module) {
    return push_back(std::to_string(size()), std::move(module));
  }
  /// Appends under a name of your own.
  template <class M>
  ModuleHolder<M> push_back(const std::string& name, std::shared_ptr<M> module) {
    static_assert(std::is_base_of<UnaryModule, M>::value,
                  "Sequential holds tensor -> tensor modules (derived from nn::UnaryModule)");
    return append(name, std::move(module));
  }
  /// Appends every module of `other` (the same modules, not copies) under the names
  /// "<size()>", ..., as PyTorch's Sequential.extend.
  Sequential& extend(const Sequential& other);
  Sequential& extend(const std::vector<std::shared_ptr<UnaryModule>>& modules);

  /// x -> modules[n-1](...modules[0](x))
  Tensor forward(const Tensor& x) override;
  /// A Sequential of every item's clone(), under the same names.
  std::shared_ptr<Module> clone() const override;
};

/// A list of modules of any kind, registered as "0", "1", ... so their parameters are named
/// "0.weight", "1.weight", ... It has no forward: the owner loops over it, and an item called
/// as item(x) runs its tensor -> tensor forward (tg::ValueError if it has none).
class ModuleList : public ModuleSequence<Module, Module> {
 public:
  ModuleList() : ModuleSequence("ModuleList") {}
  template <class... M>
  explicit ModuleList(std::shared_ptr<M>... modules) : ModuleSequence("ModuleList") {
    (push_back(std::move(modules)), ...);
  }

  /// Appends under the name "<size()>" and returns the module.
  template <class M>
  ModuleHolder<M> push_back(std::shared_ptr<M> module) {
    return append(std::to_string(size()), std::move(module));
  }
  /// Appends every module of `other` (the same modules, not copies), as PyTorch's extend.
  ModuleList& extend(const ModuleList& other);
  ModuleList& extend(const std::vector<std::shared_ptr<Module>>& modules);
  /// Inserts `module` before position `index` (negative counts from the end, as Python's
  /// list.insert; index in [-size(), size()], tg::IndexError otherwise) and renames the
  /// items "0", "1", ... in their new order.
  template <class M>
  ModuleHolder<M> insert(int64_t index, std::shared_ptr<M> module) {
    const size_t pos = insert_position(index);
    auto held = push_back(std::move(module));
    move_child_and_renumber(items_.size() - 1, pos);
    ModuleHolder<Module> last = items_.back();
    items_.pop_back();
    items_.insert(items_.begin() + static_cast<std::ptrdiff_t>(pos), last);
    return held;
  }
  /// A ModuleList of every item's clone(), under the same names.
  std::shared_ptr<Module> clone() const override;

 private:
  size_t insert_position(int64_t index) const;
};

}  // namespace nn
}  // namespace tg
