// The simple layers: Embedding, LayerNorm, Dropout, the activations, Softmax, LogSoftmax,
// Identity, Flatten, Sequential, ModuleList.
//
// Legend: S = any shape of ids, V = vocabulary size, C = channels/features.
#include <cmath>
#include <typeinfo>

#include "nn/format.h"
#include "ops/linear_act.h"
#include "tapegrad/autograd.h"
#include "tapegrad/nn/init.h"
#include "tapegrad/nn/layers.h"
#include "tapegrad/nn/linear.h"
#include "tapegrad/ops.h"

namespace tg {
namespace nn {

// ---- Embedding -------------------------------------------------------------------------------

Embedding::Embedding(const EmbeddingOptions& o) : Embedding(o, Tensor()) {}

Embedding::Embedding(const EmbeddingOptions& o, const Tensor& pretrained)
    : Cloneable("Embedding"), options(o) {
  const int64_t V = o.num_embeddings(), C = o.embedding_dim();
  if (V <= 0 || C <= 0)
    value_error("num_embeddings and embedding_dim must be positive, got " + std::to_string(V) +
                " and " + std::to_string(C));
  if (o.padding_idx()) {
    const int64_t p = *o.padding_idx();
    if (p < -V || p >= V)
      value_error("padding_idx must be in [-" + std::to_string(V) + ", " + std::to_string(V) +
                  "), got " + std::to_string(p));
    options.padding_idx(p < 0 ? p + V : p);  // PyTorch: padding_idx = V + padding_idx
  }
  if (pretrained.defined()) {
    weight = register_parameter("weight", pretrained);
    return;
  }
  weight = register_parameter("weight", zeros({V, C}));
  reset_parameters();
}

void Embedding::reset_parameters() {
  init::normal_(weight);
  if (options.padding_idx()) {
    const int64_t C = options.embedding_dim();
    float* row = weight.data_ptr() + *options.padding_idx() * C;
    std::fill(row, row + C, 0.0f);
  }
}

Tensor Embedding::forward(const Tensor& ids) const {
  if (!ids.defined()) throw ValueError(where() + ": the ids are undefined");
  if (ids.dtype() != kInt64)
    throw TypeError(where() + ": ids must be an int64 tensor, got " + to_string(ids.dtype()));
  return forward(Indices(ids));
}

std::shared_ptr<Embedding> Embedding::from_pretrained(const Tensor& embeddings,
                                                      const EmbeddingFromPretrainedOptions& o) {
  if (!embeddings.defined()) throw ValueError("Embedding::from_pretrained: embeddings is undefined");
  if (embeddings.dim() != 2)
    throw ShapeError("Embedding::from_pretrained: embeddings must be 2-D (num_embeddings, "
                     "embedding_dim), got shape " + to_string(embeddings.shape()));
  auto opts = EmbeddingOptions(embeddings.size(0), embeddings.size(1)).padding_idx(o.padding_idx());
  // The weight is an alias of `embeddings`, as PyTorch's Parameter(embeddings).
  std::shared_ptr<Embedding> m(new Embedding(opts, embeddings.detach()));
  m->weight.requires_grad_(!o.freeze());
  return m;
}

// (S...) -> (S..., C)
Tensor Embedding::forward(const Indices& ids) const {
  const auto scope = this->scope();  // names this module in anomaly reports
  const int64_t V = options.num_embeddings();
  for (size_t i = 0; i < ids.values.size(); ++i) {
    const int64_t id = ids.values[i];
    if (id < 0 || id >= V)
      throw IndexError(where() + ": id " + std::to_string(id) + " at flat position " +
                       std::to_string(i) + " of ids shape " + to_string(ids.shape) +
                       " is out of range [0, " + std::to_string(V) + ")");
  }
  return embedding(weight, ids, options.padding_idx() ? *options.padding_idx() : -1);
}

std::string Embedding::extra_repr() const {
  std::string s = std::to_string(options.num_embeddings()) + ", " + std::to_string(options.embedding_dim());
  if (options.padding_idx()) s += ", padding_idx=" + std::to_string(*options.padding_idx());
  return s;
}

std::string Embedding::signature() const {
  return std::to_string(options.num_embeddings()) + "×" + std::to_string(options.embedding_dim());
}

// ---- LayerNorm -------------------------------------------------------------------------------

LayerNorm::LayerNorm(const LayerNormOptions& o) : Cloneable("LayerNorm"), options(o) {
  if (o.normalized_shape().empty()) value_error("normalized_shape must not be empty");
  for (int64_t d : o.normalized_shape())
    if (d <= 0) value_error("normalized_shape must be positive, got " + to_string(o.normalized_shape()));
  if (!(o.eps() >= 0.0f)) value_error("eps must be >= 0, got " + detail::format_float(o.eps()));
  if (o.elementwise_affine()) {
    weight = register_parameter("weight", ones(o.normalized_shape()));
    bias = register_parameter("bias", zeros(o.normalized_shape()));
  }
}

void LayerNorm::reset_parameters() {
  if (!weight.defined()) return;
  init::ones_(weight);
  init::zeros_(bias);
}

// (..., N...) -> (..., N...)
Tensor LayerNorm::forward(const Tensor& x) {
  const auto scope = this->scope();  // names this module in anomaly reports
  if (!x.defined()) value_error("input is undefined");
  const Shape s = x.shape(), &n = options.normalized_shape();
  bool ok = s.size() >= n.size();
  for (size_t i = 0; ok && i < n.size(); ++i) ok = s[s.size() - n.size() + i] == n[i];
  if (!ok)
    shape_error("input shape " + to_string(s) + " does not end with normalized_shape " + to_string(n));
  return layer_norm(x, n, weight, bias, options.eps());
}

std::string LayerNorm::extra_repr() const {
  return to_string(options.normalized_shape()) + ", eps=" + detail::format_float(options.eps()) +
         ", elementwise_affine=" + (options.elementwise_affine() ? "true" : "false");
}

std::string LayerNorm::signature() const { return to_string(options.normalized_shape()); }

// ---- Dropout ---------------------------------------------------------------------------------

Dropout::Dropout(const DropoutOptions& o) : Cloneable("Dropout"), options(o) {
  if (!(o.p() >= 0.0f && o.p() <= 1.0f)) value_error("p must be in [0, 1], got " + detail::format_float(o.p()));
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, options.p(), is_training()); }

std::string Dropout::extra_repr() const { return "p=" + detail::format_float(options.p()); }

// ---- activations -----------------------------------------------------------------------------

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

GELU::GELU(const GELUOptions& o) : Cloneable("GELU"), options(o) {
  if (o.approximate() != "none" && o.approximate() != "tanh")
    value_error("approximate must be \"none\" or \"tanh\", got \"" + o.approximate() + "\"");
}

Tensor GELU::forward(const Tensor& x) { return gelu(x, options.approximate() == "tanh"); }

std::string GELU::extra_repr() const { return "approximate=" + options.approximate(); }

// ---- softmax, shapes ------------------------------------------------------------------------

Softmax::Softmax(const SoftmaxOptions& o) : Cloneable("Softmax"), options(o) {}
// (...) -> (...); tg::softmax checks the dim against the input.
Tensor Softmax::forward(const Tensor& x) { return softmax(x, options.dim()); }
std::string Softmax::extra_repr() const { return "dim=" + std::to_string(options.dim()); }

LogSoftmax::LogSoftmax(const LogSoftmaxOptions& o) : Cloneable("LogSoftmax"), options(o) {}
Tensor LogSoftmax::forward(const Tensor& x) { return log_softmax(x, options.dim()); }
std::string LogSoftmax::extra_repr() const { return "dim=" + std::to_string(options.dim()); }

Tensor Identity::forward(const Tensor& x) { return x; }

Flatten::Flatten(const FlattenOptions& o) : Cloneable("Flatten"), options(o) {}
// (d0, ..., d_start, ..., d_end, ...) -> (d0, ..., d_start·...·d_end, ...)
Tensor Flatten::forward(const Tensor& x) {
  if (!x.defined()) value_error("input is undefined");
  return flatten(x, options.start_dim(), options.end_dim());
}
std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(options.start_dim()) + ", end_dim=" + std::to_string(options.end_dim());
}

// ---- containers ------------------------------------------------------------------------------

namespace {

/// Runs `first` and `second` as one op, y ← act(linear(y)), and returns true, where nothing
/// can tell the difference (else false, y untouched: run them one by one): `first` exactly a
/// Linear and `second` exactly a ReLU or an exact GELU (not subclasses, whose forward may do
/// more), an input and a weight the Linear takes (else its own forward runs, and its error
/// names it), and anomaly detection off (its reports name each op and module as without
/// fusion). There are no forward hooks to call, and neither module depends on train/eval.
/// Not inlined: Sequential::forward recurses once per nesting level, and its frame must stay
/// small (10,000 nested Sequentials run under AddressSanitizer, test_module.cpp).
[[gnu::noinline]] bool forward_fused(const UnaryModule& first, const UnaryModule& second,
                                     Tensor& y) {
  if (typeid(first) != typeid(Linear) || is_anomaly_enabled()) return false;
  const Linear& lin = static_cast<const Linear&>(first);
  const int64_t in = lin.options.in_features();
  if (!y.defined() || y.dtype() != kFloat32 || y.dim() == 0 || y.size(-1) != in) return false;
  if (!lin.weight.defined() || lin.weight.shape() != Shape{lin.options.out_features(), in})
    return false;  // a weight replaced by another shape: linear's error
  detail::Activation act = detail::Activation::None;
  if (typeid(second) == typeid(ReLU))
    act = detail::Activation::Relu;
  else if (typeid(second) == typeid(GELU) &&
           static_cast<const GELU&>(second).options.approximate() == "none")
    act = detail::Activation::Gelu;
  if (act == detail::Activation::None) return false;
  y = detail::linear_act(y, lin.weight, lin.bias, act);
  return true;
}

}  // namespace

// A Linear followed by ReLU or exact GELU runs as one op, detail::linear_act (as FeedForward's
// fc1): the activation in place over the GEMM's output and its derivative applied in the
// gradient's buffer, one pass each instead of two; the same values and gradients, bit for bit.
Tensor Sequential::forward(const Tensor& x) {
  const auto scope = this->scope();  // names this module in anomaly reports
  Tensor y = x;
  for (size_t i = 0; i < items_.size(); ++i) {
    if (i + 1 < items_.size() && forward_fused(*items_[i], *items_[i + 1], y))
      ++i;  // the activation ran too
    else
      y = items_[i]->forward(y);
  }
  return y;
}

Sequential& Sequential::extend(const Sequential& other) {
  const auto modules = std::vector<ModuleHolder<UnaryModule>>(other.begin(), other.end());
  for (const auto& m : modules) push_back(m.ptr());  // a copy first: other may be *this
  return *this;
}

Sequential& Sequential::extend(const std::vector<std::shared_ptr<UnaryModule>>& modules) {
  for (const auto& m : modules) push_back(m);
  return *this;
}

std::shared_ptr<Module> Sequential::clone() const { return clone_into(std::make_shared<Sequential>()); }

ModuleList& ModuleList::extend(const ModuleList& other) {
  const auto modules = std::vector<ModuleHolder<Module>>(other.begin(), other.end());
  for (const auto& m : modules) push_back(m.ptr());
  return *this;
}

ModuleList& ModuleList::extend(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& m : modules) push_back(m);
  return *this;
}

size_t ModuleList::insert_position(int64_t index) const {
  const auto n = static_cast<int64_t>(size());
  if (index < -n || index > n)
    throw IndexError(where() + ": insert index " + std::to_string(index) + " out of range for " +
                     std::to_string(n) + " modules (expected [-" + std::to_string(n) + ", " +
                     std::to_string(n) + "])");
  return static_cast<size_t>(index < 0 ? index + n : index);
}

std::shared_ptr<Module> ModuleList::clone() const { return clone_into(std::make_shared<ModuleList>()); }

}  // namespace nn
}  // namespace tg
