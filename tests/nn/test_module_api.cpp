// Modules that read like LibTorch (issue 16): callable holders (fc1(x)) and ModuleList items,
// named lookups, clone(), state dicts in memory, parameters_to_vector, orthogonal_ and
// calculate_gain, Sequential::extend / ModuleList::insert, constructor shortcuts, and the
// modules Softmax, LogSoftmax, Flatten, Identity and Embedding::from_pretrained (gradient
// checks and PyTorch 1.13 values from tests/reference/make_nn.py).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "nn/init_internal.h"
#include "reference.h"
#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;
using tg::nn::ModuleHolder;

namespace {

class ModuleApi : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(16); }
};

std::string tmp_path(const std::string& name) {
  static const test_util::ScratchDir dir("tg_module_api");
  return dir.path(name);
}

/// The message of the exception `f` throws as an E, or "" (a test failure) if none.
template <class E>
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool same_values(const Tensor& a, const Tensor& b) { return a.shape() == b.shape() && a.to_vector() == b.to_vector(); }

// ---- a user module in LibTorch's style ----------------------------------------------------

struct MlpOptions {
  MlpOptions(int64_t in, int64_t hidden, int64_t out) : in_(in), hidden_(hidden), out_(out) {}
  TG_ARG(int64_t, in);
  TG_ARG(int64_t, hidden);
  TG_ARG(int64_t, out);
};

/// fc1 -> relu -> fc2, a LayerNorm child with a buffer, cloneable.
struct Mlp : nn::Cloneable<Mlp> {
  explicit Mlp(const MlpOptions& o) : Cloneable("Mlp"), options(o) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(o.in(), o.hidden()));
    ln = register_module("ln", std::make_shared<nn::LayerNorm>(o.hidden()));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(o.hidden(), o.out()));
    scale = register_buffer("scale", full({o.out()}, 2.0f));
  }
  Tensor forward(const Tensor& x) { return fc2(relu(ln(fc1(x)))) * scale; }

  MlpOptions options;
  ModuleHolder<nn::Linear> fc1, fc2;
  ModuleHolder<nn::LayerNorm> ln;
  Tensor scale;
};

/// A module that did not opt in to clone().
struct Plain : nn::Module {
  Plain() : Module("Plain") { fc = register_module("fc", std::make_shared<nn::Linear>(2, 2)); }
  std::shared_ptr<nn::Linear> fc;  // what register_module gave before holders: still fits
};

}  // namespace

// ---- holders -------------------------------------------------------------------------------

TEST_F(ModuleApi, HolderCallsForwardAndConverts) {
  auto net = std::make_shared<Mlp>(MlpOptions(3, 5, 2));
  const Tensor x = randn({4, 3});
  const Tensor by_arrow = net->fc2->forward(relu(net->ln->forward(net->fc1->forward(x)))) * net->scale;
  EXPECT_TRUE(same_values(net->forward(x), by_arrow));
  EXPECT_TRUE(same_values(net->fc1(x), (*net->fc1)(x)));

  // A holder is a shared_ptr: every place that took one still does.
  std::shared_ptr<nn::Linear> as_linear = net->fc1;
  std::shared_ptr<nn::Module> as_module = net->fc1;
  std::shared_ptr<nn::UnaryModule> as_unary = net->fc1;
  EXPECT_EQ(as_linear.get(), net->fc1.get());
  EXPECT_EQ(as_module.get(), net->fc1.get());
  EXPECT_EQ(as_unary.get(), net->fc1.get());
  EXPECT_EQ(std::dynamic_pointer_cast<nn::Linear>(as_module), net->fc1);
  ModuleHolder<nn::Module> any = net->fc1;  // from a derived holder
  EXPECT_EQ(std::dynamic_pointer_cast<nn::Linear>(any).get(), net->fc1.get());
  EXPECT_TRUE(same_values(any(x), net->fc1(x)));  // a Module holder calls forward as unary
  auto seq = std::make_shared<nn::Sequential>(net->fc1, std::make_shared<nn::ReLU>());
  EXPECT_EQ(seq->size(), 2u);

  // register_module's result is callable, kept as auto or as a shared_ptr.
  auto root = std::make_shared<nn::Module>("Root");
  auto lin = root->register_module("lin", std::make_shared<nn::Linear>(3, 2));
  static_assert(std::is_same<decltype(lin), ModuleHolder<nn::Linear>>::value, "a holder");
  EXPECT_EQ(lin(x).shape(), (Shape{4, 2}));
  EXPECT_EQ(lin->path(), "lin");

  // Constructing through the holder, and holders of modules with other forwards.
  ModuleHolder<nn::Linear> built(3, 6);
  EXPECT_EQ(built->options.out_features(), 6);
  ModuleHolder<nn::Embedding> emb(10, 4);
  EXPECT_EQ(emb(Indices({1, 2, 9}, {3})).shape(), (Shape{3, 4}));
  ModuleHolder<nn::MultiheadAttention> mha(8, 2);
  const Tensor q = randn({2, 3, 8});
  EXPECT_EQ(mha(q, q, q).output.shape(), (Shape{2, 3, 8}));
  ModuleHolder<nn::LSTM> lstm(4, 6);
  EXPECT_EQ(lstm(randn({5, 2, 4})).h_n.shape(), (Shape{1, 2, 6}));

  // Empty holders say so instead of crashing.
  ModuleHolder<nn::Linear> empty;
  EXPECT_TRUE(empty.is_empty());
  EXPECT_TRUE(contains(message_of<ValueError>([&] { empty(x); }), "empty module holder"));
  ModuleHolder<nn::Module> empty_any(nullptr);
  EXPECT_THROW(empty_any(x), ValueError);
}

TEST_F(ModuleApi, ModuleListItemsAreCallable) {
  struct Net : nn::Module {
    Net() : Module("Net") {
      blocks = register_module("blocks", std::make_shared<nn::ModuleList>(
                                             std::make_shared<nn::Linear>(4, 4), std::make_shared<nn::Tanh>(),
                                             std::make_shared<nn::Embedding>(3, 4)));
    }
    ModuleHolder<nn::ModuleList> blocks;
  };
  auto net = std::make_shared<Net>();
  const Tensor x = randn({2, 4});
  Tensor y = x;
  int called = 0;
  for (const auto& block : *net->blocks) {
    if (block->type_name() == "Embedding") break;
    y = block(y);  // no dynamic_pointer_cast
    ++called;
  }
  EXPECT_EQ(called, 2);
  EXPECT_TRUE(same_values(y, tanh(net->blocks->at<nn::Linear>(0)->forward(x))));
  EXPECT_TRUE(same_values((*net->blocks)[1](x), tanh(x)));

  // An item that is not tensor -> tensor: tg::ValueError naming its path and type.
  const std::string msg = message_of<ValueError>([&] { (*net->blocks)[2](x); });
  EXPECT_TRUE(contains(msg, "blocks.2")) << msg;
  EXPECT_TRUE(contains(msg, "Embedding")) << msg;
  EXPECT_TRUE(contains(msg, "tensor -> tensor")) << msg;

  // Sequential's items and at<T>() are callable too.
  nn::Sequential seq(std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::ReLU>());
  EXPECT_TRUE(same_values(seq[1](seq[0](x)), seq.forward(x)));
  EXPECT_TRUE(same_values(seq.at<nn::Linear>(0)(x), seq[0](x)));
}

// ---- named lookups -------------------------------------------------------------------------

TEST_F(ModuleApi, NamedParametersLookUpByName) {
  auto net = std::make_shared<Mlp>(MlpOptions(3, 5, 2));
  auto params = net->named_parameters();
  EXPECT_TRUE(params["fc1.weight"].is_same(net->fc1->weight));
  EXPECT_TRUE(params.at("ln.bias").is_same(net->ln->bias));
  EXPECT_TRUE(params.contains("fc2.bias"));
  EXPECT_FALSE(params.contains("fc3.weight"));
  ASSERT_NE(params.find("fc2.weight"), nullptr);
  EXPECT_TRUE(params.find("fc2.weight")->is_same(net->fc2->weight));
  EXPECT_EQ(params.find("scale"), nullptr);  // a buffer, not a parameter
  EXPECT_EQ(message_of<IndexError>([&] { params["fc3.weight"]; }), "Parameter 'fc3.weight' is not defined");

  // Still a sequence of pairs in registration order, with LibTorch's key()/value() too.
  std::vector<std::string> names;
  for (const auto& [name, p] : params) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "ln.weight", "ln.bias",
                                             "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(params[0].first, "fc1.weight");
  EXPECT_EQ(params[2].key(), "ln.weight");
  EXPECT_TRUE(params[2].value().is_same(net->ln->weight));
  EXPECT_EQ(params.keys(), names);
  EXPECT_EQ(params.size(), 6u);
  EXPECT_THROW(params[6], IndexError);
  std::vector<std::pair<std::string, Tensor>> as_pairs = params;
  EXPECT_EQ(as_pairs.size(), 6u);

  auto buffers = net->named_buffers();
  EXPECT_TRUE(buffers["scale"].is_same(net->scale));
  EXPECT_EQ(message_of<IndexError>([&] { buffers["fc1.weight"]; }), "Buffer 'fc1.weight' is not defined");
  auto children = net->named_children();
  EXPECT_EQ(children["ln"].get(), net->ln.get());
  EXPECT_EQ(children.keys(), (std::vector<std::string>{"fc1", "ln", "fc2"}));
  auto modules = net->named_modules();
  EXPECT_EQ(modules[""].get(), net.get());
  EXPECT_EQ(modules["fc2"].get(), net->fc2.get());
}

// ---- clone ---------------------------------------------------------------------------------

TEST_F(ModuleApi, CloneIsDeepAndIndependent) {
  auto net = std::make_shared<Mlp>(MlpOptions(3, 5, 2));
  {
    NoGradGuard no_grad;
    net->ln->weight.copy_(randn({5}));  // off its default, so a fresh module would differ
    net->scale.copy_(tensor({0.5f, -3.0f}));
  }
  net->fc2->weight.requires_grad_(false);
  net->fc1->eval();
  const Tensor x = randn({4, 3});
  const Tensor before = net->forward(x);
  sum(net->forward(x)).backward();  // the original has gradients and a history

  const auto draw_after = [] { return randn({3}).to_vector(); };
  const auto rng = default_generator().state();
  auto copy = std::dynamic_pointer_cast<Mlp>(net->clone());
  ASSERT_TRUE(copy);
  const auto drawn = draw_after();
  default_generator().set_state(rng);
  EXPECT_EQ(drawn, draw_after()) << "clone() must leave the global generator as it was";

  EXPECT_TRUE(same_values(copy->forward(x), before));
  const auto a = net->named_state(), b = copy->named_state();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(same_values(a[i].second, b[i].second)) << a[i].first;
    EXPECT_NE(a[i].second.data_ptr(), b[i].second.data_ptr()) << a[i].first << ": new storage";
    EXPECT_EQ(a[i].second.requires_grad(), b[i].second.requires_grad()) << a[i].first;
    EXPECT_TRUE(b[i].second.is_leaf());
    EXPECT_FALSE(b[i].second.grad().defined()) << a[i].first << ": a clone starts without gradients";
  }
  EXPECT_FALSE(copy->fc2->weight.requires_grad());
  EXPECT_FALSE(copy->fc1->is_training());
  EXPECT_TRUE(copy->ln->is_training());
  EXPECT_TRUE(copy->fc1.get() != net->fc1.get());
  EXPECT_EQ(copy->fc1->path(), "fc1");

  // Changing the clone leaves the original.
  {
    NoGradGuard no_grad;
    copy->fc1->weight.mul_(0.0f);
    copy->scale.add_(1.0f);
  }
  EXPECT_TRUE(same_values(net->forward(x), before));
  EXPECT_FALSE(same_values(copy->forward(x), before));
}

TEST_F(ModuleApi, BuiltInModulesClone) {
  auto check = [](const std::shared_ptr<nn::Module>& m, const std::function<Tensor(nn::Module&)>& run) {
    SCOPED_TRACE(m->type_name());
    auto copy = m->clone();
    ASSERT_TRUE(copy);
    EXPECT_EQ(copy->type_name(), m->type_name());
    EXPECT_EQ(copy->repr(), m->repr());
    EXPECT_TRUE(same_values(run(*copy), run(*m)));
    for (auto& [name, t] : copy->named_state()) {
      const Tensor original = m->named_parameters().contains(name) ? m->named_parameters()[name]
                                                                   : m->named_buffers()[name];
      EXPECT_NE(t.data_ptr(), original.data_ptr()) << name;
    }
  };
  const Tensor x = randn({2, 3, 8});
  auto unary = [x](nn::Module& m) { return dynamic_cast<nn::UnaryModule&>(m).forward(x); };
  check(std::make_shared<nn::Linear>(8, 4), unary);
  check(std::make_shared<nn::TransformerBlock>(8, 2, 16), unary);
  check(std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(8, 8), std::make_shared<nn::GELU>(),
                                         std::make_shared<nn::LayerNorm>(8), std::make_shared<nn::Flatten>(),
                                         std::make_shared<nn::Softmax>(-1)),
        unary);
  check(std::make_shared<nn::GRU>(8, 5), [x](nn::Module& m) { return dynamic_cast<nn::GRU&>(m).forward(x).output; });
  check(std::make_shared<nn::LSTMCell>(8, 3),
        [x](nn::Module& m) { return dynamic_cast<nn::LSTMCell&>(m).forward(reshape(x, {6, 8})).c; });
  check(std::make_shared<nn::Embedding>(nn::EmbeddingOptions(5, 3).padding_idx(-1)),
        [](nn::Module& m) { return dynamic_cast<nn::Embedding&>(m).forward(Indices({4, 0, 2}, {3})); });

  // A ModuleList: items cloned under their names, each keeping its own training flag.
  auto list = std::make_shared<nn::ModuleList>(std::make_shared<nn::Linear>(2, 2), std::make_shared<nn::Dropout>(0.3f));
  list->at<nn::Dropout>(1)->eval();
  auto list_copy = std::dynamic_pointer_cast<nn::ModuleList>(list->clone());
  ASSERT_TRUE(list_copy);
  EXPECT_EQ(list_copy->named_children().keys(), (std::vector<std::string>{"0", "1"}));
  EXPECT_TRUE(list_copy->is_training());
  EXPECT_TRUE((*list_copy)[0]->is_training());
  EXPECT_FALSE((*list_copy)[1]->is_training());
  EXPECT_EQ((*list_copy)[1]->path(), "1");
}

TEST_F(ModuleApi, CloneOfAModuleThatDidNotOptInThrows) {
  auto plain = std::make_shared<Plain>();
  EXPECT_EQ(message_of<ValueError>([&] { plain->clone(); }),
            "clone() has not been implemented for Plain. Subclass tg::nn::Cloneable<Plain> instead of "
            "tg::nn::Module to inherit the ability to clone");
  nn::Sequential seq(std::make_shared<nn::Linear>(2, 2));
  auto list = std::make_shared<nn::ModuleList>(plain);
  EXPECT_THROW(list->clone(), ValueError);

  // A module that grows after its constructor cannot be rebuilt from its options.
  struct Growing : nn::Cloneable<Growing> {
    Growing() : Cloneable("Growing") {}
  };
  auto g = std::make_shared<Growing>();
  g->register_parameter("late", zeros({2}));
  EXPECT_TRUE(contains(message_of<ValueError>([&] { g->clone(); }), "structure"));
}

// ---- state dicts in memory -----------------------------------------------------------------

TEST_F(ModuleApi, StateDictAliasesAndLoadsBack) {
  auto a = std::make_shared<Mlp>(MlpOptions(3, 5, 2));
  manual_seed(99);
  auto b = std::make_shared<Mlp>(MlpOptions(3, 5, 2));
  const Tensor x = randn({4, 3});
  ASSERT_FALSE(same_values(a->forward(x), b->forward(x)));

  auto state = a->state_dict();
  EXPECT_EQ(state.keys(), (std::vector<std::string>{"fc1.weight", "fc1.bias", "ln.weight", "ln.bias",
                                                    "fc2.weight", "fc2.bias", "scale"}));
  EXPECT_FALSE(state["fc1.weight"].requires_grad());  // detached
  EXPECT_EQ(state["fc1.weight"].data_ptr(), a->fc1->weight.data_ptr());  // an alias

  const uint32_t version = b->fc1->weight.version();
  const LoadReport report = load_state_dict(*b, state);
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.loaded.size(), 7u);
  EXPECT_TRUE(same_values(a->forward(x), b->forward(x)));
  EXPECT_GT(b->fc1->weight.version(), version) << "a load is an in-place write";
  EXPECT_NE(b->fc1->weight.data_ptr(), a->fc1->weight.data_ptr());
  EXPECT_TRUE(b->fc1->weight.requires_grad());

  {  // writing through the state dict writes the module, as in PyTorch
    NoGradGuard no_grad;
    state["scale"].copy_(tensor({7.0f, 8.0f}));
  }
  EXPECT_EQ(a->scale.to_vector(), (std::vector<float>{7.0f, 8.0f}));

  // Pairs of your own, and non-contiguous sources.
  nn::Linear lin(3, 2);
  const Tensor w = randn({3, 2});
  load_state_dict(lin, {{"weight", transpose(w, 0, 1)}, {"bias", tensor({1.0f, 2.0f})}});
  EXPECT_EQ(lin.weight.to_vector(), transpose(w, 0, 1).to_vector());
  EXPECT_EQ(lin.bias.to_vector(), (std::vector<float>{1.0f, 2.0f}));
}

TEST_F(ModuleApi, LoadStateDictIsAsStrictAsAFileLoad) {
  auto small = std::make_shared<Mlp>(MlpOptions(3, 5, 2));
  auto big = std::make_shared<Mlp>(MlpOptions(3, 6, 2));
  const std::string path = tmp_path("small.ckpt");
  save(*small, path);
  auto state = small->state_dict();
  std::vector<std::pair<std::string, Tensor>> extra = state;
  extra.emplace_back("fc3.weight", zeros({1}));
  extra.erase(extra.begin() + 1);  // fc1.bias missing
  nn::Linear ignored(1, 1);
  (void)ignored;

  const auto before = big->state_dict();
  std::vector<std::vector<float>> values;
  for (auto& [n, t] : before) values.push_back(t.to_vector());

  // Strict: the same message, naming every key and both shapes, with the in-memory nouns.
  const std::string from_file = message_of<CheckpointError>([&] { load(*big, path); });
  const std::string from_memory = message_of<CheckpointError>([&] { load_state_dict(*big, state); });
  std::string expected = from_file;
  const std::string file_source = "checkpoint '" + path + "'";
  ASSERT_EQ(expected.rfind(file_source, 0), 0u) << expected;
  expected.replace(0, file_source.size(), "load_state_dict");
  for (size_t at; (at = expected.find("the file")) != std::string::npos;) expected.replace(at, 8, "the state dict");
  EXPECT_EQ(from_memory, expected);
  EXPECT_TRUE(contains(from_memory, "fc1.weight: the model has [6, 3], the state dict has [5, 3]")) << from_memory;
  EXPECT_TRUE(contains(from_memory, "nothing was loaded")) << from_memory;
  const auto after = big->state_dict();
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(after[i].second.to_vector(), values[i]);

  // Missing and unexpected keys.
  auto same = std::make_shared<Mlp>(MlpOptions(3, 5, 2));
  const std::string msg = message_of<CheckpointError>([&] { load_state_dict(*same, extra); });
  EXPECT_TRUE(contains(msg, "missing    fc1.bias: the model has [5], the state dict has no such entry")) << msg;
  EXPECT_TRUE(contains(msg, "unexpected fc3.weight: the state dict has [1]")) << msg;

  // Non-strict: loads what fits and reports the rest, as a file load does.
  const LoadReport r = load_state_dict(*same, extra, LoadOptions().strict(false));
  EXPECT_EQ(r.missing, (std::vector<std::string>{"fc1.bias"}));
  EXPECT_EQ(r.unexpected, (std::vector<std::string>{"fc3.weight"}));
  EXPECT_EQ(r.loaded.size(), 6u);
  EXPECT_TRUE(same_values(same->fc2->weight, small->fc2->weight));
  const LoadReport file_report = load(*big, path, LoadOptions().strict(false));
  const LoadReport memory_report = load_state_dict(*big, state, LoadOptions().strict(false));
  EXPECT_EQ(file_report.to_string(), memory_report.to_string());
  EXPECT_EQ(file_report.loaded, memory_report.loaded);
}

// ---- parameters_to_vector ------------------------------------------------------------------

TEST_F(ModuleApi, ParametersToVectorRoundTrip) {
  auto net = std::make_shared<Mlp>(MlpOptions(3, 4, 2));
  const auto params = net->parameters();
  const Tensor v = nn::utils::parameters_to_vector(params);
  EXPECT_EQ(v.shape(), (Shape{net->num_parameters()}));
  std::vector<float> expected;
  for (const auto& p : params)
    for (float f : p.to_vector()) expected.push_back(f);
  EXPECT_EQ(v.to_vector(), expected);

  // Recorded: d(Σ v·c)/dp is c's slice for each parameter.
  const Tensor c = randn({v.numel()});
  sum(v * c).backward();
  int64_t offset = 0;
  const std::vector<float> cv = c.to_vector();
  for (const auto& p : params) {
    const std::vector<float> g = p.grad().to_vector();
    EXPECT_EQ(g, std::vector<float>(cv.begin() + offset, cv.begin() + offset + p.numel()));
    offset += p.numel();
  }

  const Tensor doubled = v.detach() * 2.0f;
  std::vector<uint32_t> versions;
  for (const auto& p : params) versions.push_back(p.version());
  nn::utils::vector_to_parameters(doubled, params);
  EXPECT_EQ(nn::utils::parameters_to_vector(net->parameters()).to_vector(), doubled.to_vector());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_GT(params[i].version(), versions[i]);
    EXPECT_TRUE(params[i].is_leaf());
    EXPECT_TRUE(params[i].requires_grad());
  }

  const std::string msg =
      message_of<ShapeError>([&] { nn::utils::vector_to_parameters(zeros({v.numel() + 1}), params); });
  EXPECT_TRUE(contains(msg, "vector_to_parameters")) << msg;
  EXPECT_TRUE(contains(msg, "[" + std::to_string(v.numel()) + "]")) << msg;
  EXPECT_THROW(nn::utils::vector_to_parameters(zeros({1, v.numel()}), params), ShapeError);
  EXPECT_THROW(nn::utils::parameters_to_vector({}), ValueError);
}

// ---- init ----------------------------------------------------------------------------------

namespace {
/// max |AᵀA - I| (rows >= cols) or |AAᵀ - I| (rows < cols) of a (rows, cols) matrix / gain.
double orthogonality_error(const std::vector<float>& a, int64_t rows, int64_t cols, double gain) {
  const bool tall = rows >= cols;
  const int64_t k = tall ? cols : rows, len = tall ? rows : cols;
  double worst = 0;
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) {
      double dot = 0;
      for (int64_t t = 0; t < len; ++t) {
        const double x = tall ? a[static_cast<size_t>(t * cols + i)] : a[static_cast<size_t>(i * cols + t)];
        const double y = tall ? a[static_cast<size_t>(t * cols + j)] : a[static_cast<size_t>(j * cols + t)];
        dot += x * y;
      }
      worst = std::max(worst, std::abs(dot / (gain * gain) - (i == j ? 1.0 : 0.0)));
    }
  return worst;
}

const std::vector<std::pair<Shape, double>> kOrthogonal = {
    {{6, 4}, 1.0}, {{3, 7}, 1.0}, {{4, 2, 3}, 2.0}, {{5, 5}, 5.0 / 3}};
}  // namespace

TEST_F(ModuleApi, OrthogonalIsOrthogonalScaledAndSeeded) {
  for (const auto& [shape, gain] : std::vector<std::pair<Shape, double>>{
           {{64, 32}, 1.0}, {{20, 50}, 1.0}, {{16, 4, 3, 3}, 1.0}, {{40, 40}, 3.0}}) {
    SCOPED_TRACE(to_string(shape));
    Tensor w = zeros(shape);
    const uint32_t version = w.version();
    nn::init::orthogonal_(w, gain);
    EXPECT_GT(w.version(), version);
    const int64_t rows = shape[0], cols = w.numel() / rows;
    EXPECT_LT(orthogonality_error(w.to_vector(), rows, cols, gain), 1e-5);
    manual_seed(5);
    const Tensor a = nn::init::orthogonal_(zeros(shape), gain);
    manual_seed(5);
    const Tensor b = nn::init::orthogonal_(zeros(shape), gain);
    EXPECT_EQ(a.to_vector(), b.to_vector());
    EXPECT_NE(a.to_vector(), nn::init::orthogonal_(zeros(shape), gain).to_vector());
  }
  EXPECT_THROW(nn::init::orthogonal_(zeros({5})), ValueError);
  EXPECT_NO_THROW(nn::init::orthogonal_(zeros({0, 3})));
}

TEST_F(ModuleApi, OrthogonalMatchesPyTorchOnTheSameDraw) {
  for (size_t i = 0; i < kOrthogonal.size(); ++i) {
    const auto& [shape, gain] = kOrthogonal[i];
    SCOPED_TRACE(to_string(shape));
    const Tensor normal = ref::load("nn/orthogonal." + std::to_string(i) + ".normal.npy");
    const Tensor expected = ref::load("nn/orthogonal." + std::to_string(i) + ".w.npy");
    ASSERT_EQ(expected.shape(), shape);
    Tensor w = zeros(shape);
    nn::init::impl::orthogonal_from_normal(normal.to_vector(), normal.size(0), normal.size(1), gain, w.data_ptr());
    EXPECT_TRUE(ref::close(w, expected, 1e-5, 1e-4));
  }
}

TEST_F(ModuleApi, CalculateGainEqualsPyTorchExactly) {
  EXPECT_EQ(nn::init::calculate_gain("tanh"), 5.0 / 3);
  EXPECT_EQ(nn::init::calculate_gain("relu"), std::sqrt(2.0));
  const std::vector<std::pair<std::string, std::optional<double>>> cases = {
      {"linear", {}},     {"conv1d", {}},     {"conv_transpose2d", {}}, {"sigmoid", {}},
      {"tanh", {}},       {"relu", {}},       {"leaky_relu", {}},       {"leaky_relu", 0.2},
      {"leaky_relu", std::sqrt(5.0)},         {"selu", {}}};
  const auto expected = xt::load_npy<double>(ref::path("nn/init.gains64.npy"));
  ASSERT_EQ(expected.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(nn::init::calculate_gain(cases[i].first, cases[i].second), expected(i)) << cases[i].first;
  EXPECT_THROW(nn::init::calculate_gain("swish"), ValueError);
}

// ---- extend and insert ---------------------------------------------------------------------

TEST_F(ModuleApi, SequentialExtend) {
  auto a = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 3));
  auto b = std::make_shared<nn::Sequential>(std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(3, 2));
  a->extend(*b).extend({std::make_shared<nn::Tanh>()});
  EXPECT_EQ(a->named_children().keys(), (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(a->named_parameters().keys(), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ((*a)[2].get(), (*b)[1].get());  // the same modules, as PyTorch
  const Tensor x = randn({2, 4});
  EXPECT_TRUE(same_values(a->forward(x), tanh(b->forward(a->at<nn::Linear>(0)(x)))));
  a->extend(*a);  // itself: each module once more
  EXPECT_EQ(a->size(), 8u);
}

TEST_F(ModuleApi, ModuleListInsertRenumbers) {
  auto l0 = std::make_shared<nn::Linear>(1, 1), l1 = std::make_shared<nn::Linear>(2, 2),
       l2 = std::make_shared<nn::Linear>(3, 3), l3 = std::make_shared<nn::Linear>(4, 4);
  struct Net : nn::Module {
    Net() : Module("Net") { list = register_module("list", std::make_shared<nn::ModuleList>()); }
    ModuleHolder<nn::ModuleList> list;
  };
  auto net = std::make_shared<Net>();
  auto& list = *net->list;
  list.push_back(l1);
  list.insert(0, l0);              // [l0, l1]
  list.insert(2, l3);              // [l0, l1, l3]  (at the end)
  auto held = list.insert(-1, l2);  // [l0, l1, l2, l3]  (before the last, as list.insert)
  EXPECT_EQ(held.get(), l2.get());
  ASSERT_EQ(list.size(), 4u);
  const std::vector<nn::Module*> order{l0.get(), l1.get(), l2.get(), l3.get()};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(list[i].get(), order[i]) << i;
    EXPECT_EQ(list[i]->path(), "list." + std::to_string(i));
  }
  EXPECT_EQ(list.named_children().keys(), (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_TRUE(net->named_parameters()["list.2.weight"].is_same(l2->weight));
  EXPECT_TRUE(net->named_parameters()["list.0.bias"].is_same(l0->bias));
  list.insert(-4, std::make_shared<nn::ReLU>());  // at the front
  EXPECT_EQ(list[0]->type_name(), "ReLU");
  EXPECT_TRUE(net->named_parameters()["list.1.weight"].is_same(l0->weight));
  EXPECT_EQ(message_of<IndexError>([&] { list.insert(6, std::make_shared<nn::ReLU>()); }),
            "list (ModuleList): insert index 6 out of range for 5 modules (expected [-5, 5])");
  EXPECT_THROW(list.insert(-6, std::make_shared<nn::ReLU>()), IndexError);

  nn::ModuleList more(std::make_shared<nn::Tanh>());
  list.extend(more).extend({std::make_shared<nn::Sigmoid>()});
  EXPECT_EQ(list.size(), 7u);
  EXPECT_EQ(list[6]->type_name(), "Sigmoid");
  EXPECT_EQ(list[5]->path(), "list.5");
}

// ---- constructor shortcuts ---------------------------------------------------------------

TEST_F(ModuleApi, ConstructorShortcuts) {
  nn::TransformerBlock block(16, 4, 64);
  EXPECT_EQ(block.options.d_model(), 16);
  EXPECT_EQ(block.options.num_heads(), 4);
  EXPECT_EQ(block.options.d_ff(), 64);
  nn::LayerNorm ln1({8});
  EXPECT_EQ(ln1.options.normalized_shape(), (Shape{8}));
  nn::LayerNorm ln2(Shape{3, 4});
  EXPECT_EQ(ln2.weight.shape(), (Shape{3, 4}));
  nn::LayerNorm ln3({3, 4});
  EXPECT_EQ(ln3.options.normalized_shape(), (Shape{3, 4}));
  nn::Softmax sm(1);
  EXPECT_EQ(sm.options.dim(), 1);
  nn::Flatten fl(0, 1);
  EXPECT_EQ(fl.options.start_dim(), 0);
  EXPECT_EQ(fl.options.end_dim(), 1);
  nn::Flatten fl_default;
  EXPECT_EQ(fl_default.options.start_dim(), 1);
  EXPECT_EQ(fl_default.options.end_dim(), -1);
  EXPECT_EQ(nn::Embedding(100, 16).weight.shape(), (Shape{100, 16}));
  EXPECT_EQ(nn::MultiheadAttention(64, 4).head_dim, 16);
  EXPECT_EQ(nn::GRU(3, 5).options.hidden_size(), 5);
}

// ---- the new modules: PyTorch values and gradient checks -----------------------------------

namespace {
std::string file(const std::string& name, const std::string& key) { return "nn/" + name + "." + key + ".npy"; }

void unary_reference(const std::string& name, nn::UnaryModule& m, const Shape& y_shape) {
  SCOPED_TRACE(name);
  const Tensor x = ref::load(file(name, "x"), /*requires_grad=*/true);
  const Tensor y = m.forward(x);
  EXPECT_EQ(y.shape(), y_shape);
  EXPECT_TRUE(ref::close(y, ref::load(file(name, "y"))));
  y.backward(ref::load(file(name, "g")));
  EXPECT_TRUE(ref::close(x.grad(), ref::load(file(name, "dx"))));
  EXPECT_EQ(ref::load_indices(file(name, "nparams")).values[0], 0);
}

void gradcheck_unary(nn::UnaryModule& m, const Shape& shape) {
  const Tensor x = test_util::random_input(shape, -2.0f, 2.0f);
  const auto r = gradcheck([&](const std::vector<Tensor>& in) { return m.forward(in[0]); }, {x});
  EXPECT_TRUE(r.ok) << m.type_name() << ": " << r.message;
}
}  // namespace

TEST_F(ModuleApi, SoftmaxLogSoftmaxFlattenIdentityMatchPyTorch) {
  nn::Softmax s1(1), s_neg(-1);
  unary_reference("softmax_dim1", s1, {2, 3, 4});
  unary_reference("softmax_neg", s_neg, {3, 5});
  nn::LogSoftmax l0(0), l_neg(-1);
  unary_reference("logsoftmax_dim0", l0, {4, 3});
  unary_reference("logsoftmax_neg", l_neg, {2, 3, 4});
  nn::Flatten f_default, f_mid(1, 2), f_neg(0, -2);
  unary_reference("flatten_default", f_default, {2, 60});
  unary_reference("flatten_mid", f_mid, {2, 12, 5});
  unary_reference("flatten_neg", f_neg, {6, 4});
  nn::Identity id;
  unary_reference("identity", id, {3, 4});
  const Tensor x = randn({2, 2});
  EXPECT_TRUE(id.forward(x).is_same(x));  // PyTorch's Identity returns its input

  EXPECT_EQ(s1.repr(), "Softmax(dim=1)\nTotal parameters: 0");
  EXPECT_EQ(f_mid.extra_repr(), "start_dim=1, end_dim=2");
  EXPECT_THROW(s1.forward(randn({3})), Error);
  EXPECT_THROW(f_mid.forward(randn({2, 3})), Error);
}

TEST_F(ModuleApi, SoftmaxLogSoftmaxFlattenIdentityGradcheck) {
  nn::Softmax s(1);
  gradcheck_unary(s, {3, 4, 2});
  nn::LogSoftmax l(-1);
  gradcheck_unary(l, {3, 5});
  nn::Flatten f(1, 2);
  gradcheck_unary(f, {2, 3, 2, 2});
  nn::Identity id;
  gradcheck_unary(id, {4});
}

TEST_F(ModuleApi, EmbeddingFromPretrained) {
  const std::string name = "embedding_pretrained";
  const Tensor weights = ref::load(file(name, "param.weight"));
  auto emb = nn::Embedding::from_pretrained(weights, nn::EmbeddingFromPretrainedOptions().freeze(false).padding_idx(1));
  EXPECT_EQ(emb->weight.data_ptr(), weights.data_ptr()) << "shares the given storage, as PyTorch";
  EXPECT_EQ(emb->options.padding_idx(), std::optional<int64_t>(1));
  EXPECT_TRUE(emb->weight.requires_grad());
  const Tensor y = emb->forward(ref::load_indices(file(name, "ids")));
  EXPECT_TRUE(ref::close(y, ref::load(file(name, "y"))));
  y.backward(ref::load(file(name, "g")));
  EXPECT_TRUE(ref::close(emb->weight.grad(), ref::load(file(name, "grad.weight"))));

  // Defaults: frozen, no padding; no random draw; 2-D only.
  const auto rng = default_generator().state();
  auto frozen = nn::Embedding::from_pretrained(weights);
  EXPECT_EQ(default_generator().state(), rng);
  EXPECT_FALSE(frozen->weight.requires_grad());
  EXPECT_FALSE(frozen->options.padding_idx().has_value());
  EXPECT_FALSE(frozen->clone()->named_parameters()["weight"].requires_grad());
  const std::string msg = message_of<ShapeError>([&] { nn::Embedding::from_pretrained(zeros({6})); });
  EXPECT_TRUE(contains(msg, "from_pretrained")) << msg;
  EXPECT_TRUE(contains(msg, "[6]")) << msg;

  // Gradient check through a trainable pretrained table.
  auto trainable = nn::Embedding::from_pretrained(randn({5, 3}), nn::EmbeddingFromPretrainedOptions().freeze(false));
  const auto r = gradcheck([&](const std::vector<Tensor>&) { return trainable->forward(Indices({0, 4, 4, 2}, {2, 2})); },
                           {trainable->weight});
  EXPECT_TRUE(r.ok) << r.message;
}
