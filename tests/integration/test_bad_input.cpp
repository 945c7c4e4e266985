// The bad-input suite: every public entry point fed wrong shapes and ranks, empty tensors,
// NaN and Inf, out-of-range indices and targets, bad options, autograd misuse and bad files.
//
// Table-driven. Each error case must throw the named tg:: error whose message contains every
// listed substring (what was wrong, and where: the op, the module's path or the option), and
// nothing else: no crash, no std:: exception, no silence. Each "defined" case (empty tensors
// where PyTorch defines a result, NaN and Inf propagation) must not throw and must give the
// documented result (README, "Errors").
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <typeinfo>
#include <vector>

#include "tapegrad/checkpoint.h"
#include "tapegrad/npz.h"
#include "tapegrad/tapegrad.h"

using namespace tg;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// ---- the table machinery ---------------------------------------------------------------------

struct ErrorCase {
  std::string name;
  std::function<void()> run;
  std::function<bool(const Error&)> has_type;
  std::string type;
  std::vector<std::string> expect;  // substrings of the message
};

template <class E>
ErrorCase err(std::string name, std::vector<std::string> expect, std::function<void()> run) {
  const char* type = std::is_same<E, ShapeError>::value        ? "ShapeError"
                     : std::is_same<E, IndexError>::value      ? "IndexError"
                     : std::is_same<E, ValueError>::value      ? "ValueError"
                     : std::is_same<E, AutogradError>::value   ? "AutogradError"
                     : std::is_same<E, CheckpointError>::value ? "CheckpointError"
                     : std::is_same<E, IOError>::value         ? "IOError"
                                                               : "Error";
  return {std::move(name), std::move(run),
          [](const Error& e) { return dynamic_cast<const E*>(&e) != nullptr; }, type,
          std::move(expect)};
}

int g_total_cases = 0;  // printed at the end of each table, summed in the report

/// Runs every case; returns the number run. Failures name the case.
void run_table(const char* table, const std::vector<ErrorCase>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(table) + " / " + c.name);
    try {
      c.run();
      ADD_FAILURE() << "no error was thrown (expected tg::" << c.type << ")";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_TRUE(c.has_type(e)) << "expected tg::" << c.type << ", got " << typeid(e).name()
                                 << ": " << msg;
      for (const auto& s : c.expect)
        EXPECT_NE(msg.find(s), std::string::npos)
            << "message does not contain '" << s << "': " << msg;
      if (std::getenv("TG_PRINT_ERRORS")) std::printf("  %-48s %s\n", c.name.c_str(), msg.c_str());
    } catch (const std::exception& e) {
      ADD_FAILURE() << "a non-tg exception (" << typeid(e).name() << "): " << e.what();
    } catch (...) {
      ADD_FAILURE() << "an exception that is not a std::exception";
    }
  }
  g_total_cases += static_cast<int>(cases.size());
  std::printf("[bad input] %s: %zu error cases\n", table, cases.size());
}

struct DefinedCase {
  std::string name;
  std::function<void()> run;  // asserts the documented result itself
};

void run_defined(const char* table, const std::vector<DefinedCase>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(table) + " / " + c.name);
    try {
      c.run();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw " << typeid(e).name() << ": " << e.what();
    }
  }
  g_total_cases += static_cast<int>(cases.size());
  std::printf("[bad input] %s: %zu defined-behaviour cases\n", table, cases.size());
}

bool all_nan(const Tensor& t) {
  for (float v : t.to_vector())
    if (!std::isnan(v)) return false;
  return true;
}
bool any_nan(const Tensor& t) {
  for (float v : t.to_vector())
    if (std::isnan(v)) return true;
  return false;
}
bool all_finite(const Tensor& t) {
  for (float v : t.to_vector())
    if (!std::isfinite(v)) return false;
  return true;
}

// A scratch folder removed when the process ends.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    path = ::testing::TempDir() + "tg_bad_input_" + std::to_string(::getpid());
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
const std::string& scratch() {
  static ScratchDir dir;
  return dir.path;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

struct Net : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  Net() : Module("Net") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(3, 4));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(4, 2));
  }
};

}  // namespace

// ---- tensors and factories -------------------------------------------------------------------

TEST(BadInput, TensorsAndFactories) {
  run_table("tensors", {
      err<ShapeError>("tensor: value count", {"tensor", "5 values", "[2, 3]"},
                      [] { tensor(std::vector<float>{1, 2, 3, 4, 5}, Shape{2, 3}); }),
      err<ShapeError>("tensor: negative dim", {"negative", "[2, -3]"},
                      [] { tensor(std::vector<float>{}, {2, -3}); }),
      err<ShapeError>("zeros: negative dim", {"zeros", "[-1]"}, [] { zeros({-1}); }),
      err<ShapeError>("full: negative dim", {"full", "[4, -2]"}, [] { full({4, -2}, 1.0f); }),
      err<ShapeError>("randn: negative dim", {"randn", "[-5]"}, [] { randn({-5}); }),
      err<ShapeError>("ragged rows", {"ragged"}, [] { tensor({{1, 2}, {3}}); }),
      // Regression: 2^62 elements passed the check but their byte count overflowed: numel 0,
      // a tiny buffer, and a segfault on the first bounds-checked write.
      err<ShapeError>("zeros: bytes overflow", {"zeros", "too many elements", "ptrdiff_t"},
                      [] { zeros({int64_t(1) << 31, int64_t(1) << 31}); }),
      err<ShapeError>("full: bytes overflow", {"full", "too many elements"},
                      [] { full({int64_t(1) << 40, int64_t(1) << 21}, 1.0f); }),
      // Regression: running out of memory escaped as std::bad_alloc; now a tg::Error.
      err<MemoryError>("Linear: out of memory", {"out of memory", "bytes"},
                       [] { nn::Linear(int64_t(1) << 30, int64_t(1) << 30); }),
      err<MemoryError>("arange: out of memory", {"out of memory", "bytes", "tapegrad holds"},
                       [] { arange(0.0f, 1e12f, 1.0f); }),
      // Found by fuzzing (checkpoint dims): empty, but the other dims' product overflows the strides.
      err<ShapeError>("zeros: empty with huge dims", {"zeros", "too many elements"},
                      [] { zeros({0, int64_t(1) << 40, int64_t(1) << 40}); }),
      err<ShapeError>("Indices: huge dims", {"Indices", "too many elements"},
                      [] { Indices(std::vector<int64_t>{}, {int64_t(1) << 40, int64_t(1) << 40, 0}); }),
      err<ShapeError>("reshape: empty with huge dims", {"reshape", "too many elements"},
                      [] { reshape(zeros({0}), {0, int64_t(1) << 40, int64_t(1) << 40}); }),
      err<ValueError>("arange: zero step", {"arange", "step"}, [] { arange(0.0f, 1.0f, 0.0f); }),
      err<ValueError>("arange: NaN bound", {"arange", "finite"}, [] { arange(0.0f, kNaN, 1.0f); }),
      err<ValueError>("arange: inf bound", {"arange", "finite"}, [] { arange(0.0f, kInf, 1.0f); }),
      err<ValueError>("arange: too many elements", {"arange", "elements"}, [] { arange(0.0f, 1e30f, 1.0f); }),
      err<ShapeError>("Indices: value count", {"Indices", "3 values", "[2, 2]"},
                      [] { Indices({1, 2, 3}, {2, 2}); }),
      err<ShapeError>("item on a vector", {"item", "[3]"}, [] { zeros({3}).item(); }),
      err<ShapeError>("item on an empty tensor", {"item", "[0]"}, [] { zeros({0}).item(); }),
      err<IndexError>("size(d) out of range", {"size", "dimension 2", "rank 2"}, [] { zeros({2, 3}).size(2); }),
      err<IndexError>("size(-3) out of range", {"size", "dimension -3", "rank 2"}, [] { zeros({2, 3}).size(-3); }),
      err<IndexError>("DataView flat index", {"DataView", "flat index 6", "6 elements"}, [] { zeros({2, 3}).data()[6]; }),
      err<IndexError>("DataView negative index", {"DataView", "-1"}, [] { zeros({2, 3}).data()[-1]; }),
      err<IndexError>("DataView multi-index", {"DataView", "index 2", "dim 0"}, [] { zeros({2, 3}).data()(2, 0); }),
      err<IndexError>("DataView wrong rank", {"DataView", "1 indices", "[2, 3]"}, [] { zeros({2, 3}).data()(1); }),
      err<ShapeError>("DataView::assign count", {"assign", "2"}, [] { zeros({2, 3}).data().assign({1, 2}); }),
      err<ShapeError>("set_grad shape", {"set_grad", "[3]", "[2, 3]"},
                      [] { zeros({2, 3}, true).set_grad(zeros({3})); }),
      err<ShapeError>("copy_ shape", {"copy_", "[4]", "[2, 3]"}, [] { zeros({2, 3}).copy_(zeros({4})); }),
      err<AutogradError>("requires_grad_ on a non-leaf", {"requires_grad_", "leaf"},
                         [] { (zeros({2}, true) * 2.0f).requires_grad_(false); }),
      err<AutogradError>("retain_grad without grad", {"retain_grad", "does not require grad"},
                         [] { zeros({2}).retain_grad(); }),
      err<ValueError>("shape of an undefined tensor", {"undefined"}, [] { Tensor().shape(); }),
      err<ValueError>("data of an undefined tensor", {"undefined"}, [] { Tensor().data(); }),
      err<AutogradError>("backward of an undefined tensor", {"backward", "undefined"}, [] { Tensor().backward(); }),
  });
}

// ---- autograd misuse -------------------------------------------------------------------------

TEST(BadInput, Autograd) {
  run_table("autograd", {
      err<AutogradError>("backward on a non-scalar", {"backward", "scalar", "[2, 3]"},
                         [] { (zeros({2, 3}, true) * 2.0f).backward(); }),
      err<AutogradError>("backward on an empty tensor", {"backward", "scalar", "[0]"},
                         [] { (zeros({0}, true) * 2.0f).backward(); }),
      err<ShapeError>("backward with a mis-shaped gradient", {"backward", "[3]", "[2, 3]"},
                      [] { (zeros({2, 3}, true) * 2.0f).backward(ones({3})); }),
      err<AutogradError>("backward without requires_grad", {"backward", "does not require grad"},
                         [] { sum(ones({2})).backward(); }),
      err<AutogradError>("backward twice through a freed graph", {"second time", "retain_graph", "'sum'"},
                         [] {
                           Tensor x = ones({3}, true);
                           Tensor y = sum(x * x);
                           y.backward();
                           y.backward();
                         }),
      err<AutogradError>("a branch freed by an earlier backward", {"second time", "'exp'"},
                         [] {
                           Tensor x = ones({3}, true);
                           Tensor h = exp(x);
                           sum(h).backward();
                           sum(h * 2.0f).backward();  // reaches exp's freed node
                         }),
  });
}

// ---- elementwise ops, reductions and softmax ---------------------------------------------------

TEST(BadInput, ElementwiseReductionsSoftmax) {
  const Tensor a = ones({2, 3}), b = ones({4, 3}), u;
  run_table("elementwise", {
      err<ShapeError>("add: no broadcast", {"add", "[2, 3]", "[4, 3]"}, [=] { add(a, b); }),
      err<ShapeError>("sub: no broadcast", {"sub", "[2, 3]", "[2]"}, [=] { sub(a, ones({2})); }),
      err<ShapeError>("mul: no broadcast", {"mul", "[2, 3]", "[4, 3]"}, [=] { mul(a, b); }),
      err<ShapeError>("div: no broadcast", {"div", "[2, 3]", "[0]"}, [=] { div(a, zeros({0})); }),
      err<ValueError>("add: undefined", {"add", "undefined"}, [=] { add(a, u); }),
      err<ValueError>("mul: undefined", {"mul", "undefined"}, [=] { mul(u, a); }),
      err<ValueError>("exp: undefined", {"exp", "undefined"}, [=] { exp(u); }),
      err<ValueError>("relu: undefined", {"relu", "undefined"}, [=] { relu(u); }),
      err<ValueError>("pow: undefined", {"pow", "undefined"}, [=] { pow(u, 2.0f); }),
      err<ShapeError>("where: no broadcast", {"where", "[2, 3]", "[4, 3]"}, [=] { where(ones({2, 3}), a, b); }),
      err<ShapeError>("masked_fill: mask does not broadcast", {"masked_fill", "[4, 3]", "[2, 3]"},
                      [=] { masked_fill(a, b, 0.0f); }),
  });
  run_table("reductions", {
      err<IndexError>("sum: axis out of range", {"sum", "dimension 2", "rank 2"}, [=] { sum(a, {2}); }),
      err<IndexError>("sum: axis -3", {"sum", "-3"}, [=] { sum(a, {-3}); }),
      err<IndexError>("sum: repeated axis", {"sum", "twice"}, [=] { sum(a, {0, -2}); }),
      err<IndexError>("mean: axis out of range", {"mean", "dimension 5"}, [=] { mean(a, {5}); }),
      err<ShapeError>("mean of an empty tensor", {"mean", "zero elements", "[0, 3]"}, [] { mean(zeros({0, 3})); }),
      err<ShapeError>("mean over an empty dim", {"mean", "zero elements"}, [] { mean(zeros({2, 0}), {1}); }),
      err<ShapeError>("max over an empty dim", {"max", "empty", "[2, 0]"}, [] { max(zeros({2, 0}), 1); }),
      err<IndexError>("max: axis out of range", {"max", "dimension 2"}, [=] { max(a, 2); }),
      err<IndexError>("max of a 0-d tensor, dim 1", {"max"}, [] { max(scalar(1.0f), 1); }),
      err<ValueError>("sum: undefined", {"sum", "undefined"}, [=] { sum(u); }),
  });
  run_table("softmax", {
      err<IndexError>("softmax: axis out of range", {"softmax", "dimension 2"}, [=] { softmax(a, 2); }),
      err<IndexError>("log_softmax: axis -3", {"log_softmax", "-3"}, [=] { log_softmax(a, -3); }),
      err<IndexError>("softmax of a 0-d tensor", {"softmax"}, [] { softmax(scalar(1.0f), 0); }),
  });
}

// ---- products, shape ops, indexing -------------------------------------------------------------

TEST(BadInput, ProductsShapesIndexing) {
  const Tensor a = ones({2, 3});
  run_table("matmul/linear", {
      err<ShapeError>("matmul: 0-d", {"matmul", "at least 1 dimension", "[]"}, [=] { matmul(scalar(1.0f), a); }),
      err<ShapeError>("matmul: inner dims", {"matmul", "[2, 3]", "[2, 3]"}, [=] { matmul(a, a); }),
      err<ShapeError>("matmul: vectors of different length", {"matmul", "[3]", "[4]"},
                      [] { matmul(ones({3}), ones({4})); }),
      err<ShapeError>("matmul: batch dims", {"matmul", "[2, 2, 3]", "[3, 3, 4]"},
                      [] { matmul(ones({2, 2, 3}), ones({3, 3, 4})); }),
      err<ValueError>("matmul: undefined", {"matmul", "undefined"}, [=] { matmul(a, Tensor()); }),
      err<ShapeError>("linear: 1-D weight", {"linear", "2-D", "[3]"}, [=] { linear(a, ones({3})); }),
      err<ShapeError>("linear: in mismatch", {"linear", "input last dim 3", "[4, 5]"}, [=] { linear(a, ones({4, 5})); }),
      err<ShapeError>("linear: 0-d input", {"linear", "(none)"}, [] { linear(scalar(1.0f), ones({4, 1})); }),
      err<ShapeError>("linear: bias shape", {"linear", "bias", "[5]", "[4]"}, [=] { linear(a, ones({4, 3}), ones({5})); }),
      err<ValueError>("linear: undefined weight", {"linear", "undefined"}, [=] { linear(a, Tensor()); }),
  });
  run_table("shape ops", {
      err<IndexError>("transpose: dim out of range", {"transpose", "3"}, [=] { transpose(a, 0, 3); }),
      err<ShapeError>("permute: wrong count", {"permute", "3 dims", "[2, 3]"}, [=] { permute(a, {0, 1, 2}); }),
      err<IndexError>("permute: repeated", {"permute", "repeated"}, [=] { permute(a, {0, 0}); }),
      err<IndexError>("permute: out of range", {"permute", "5"}, [=] { permute(a, {0, 5}); }),
      err<ShapeError>("reshape: wrong count", {"reshape", "[4, 2]", "[2, 3]"}, [=] { reshape(a, {4, 2}); }),
      err<ShapeError>("reshape: two -1", {"reshape", "only one", "-1"}, [=] { reshape(a, {-1, -1}); }),
      err<ShapeError>("reshape: -2", {"reshape", "[-2, 3]"}, [=] { reshape(a, {-2, 3}); }),
      err<ShapeError>("reshape: -1 with a zero dim", {"reshape", "[0, -1]"}, [=] { reshape(zeros({0, 3}), {0, -1}); }),
      err<IndexError>("flatten: start after end", {"flatten", "start dim 1", "end dim 0"}, [=] { flatten(a, 1, 0); }),
      err<IndexError>("flatten: out of range", {"flatten", "4"}, [=] { flatten(a, 0, 4); }),
      err<IndexError>("squeeze: dim out of range", {"squeeze", "3"}, [=] { squeeze(a, 3); }),
      err<IndexError>("unsqueeze: dim out of range", {"unsqueeze", "4"}, [=] { unsqueeze(a, 4); }),
      err<ValueError>("cat: empty list", {"cat", "non-empty"}, [] { cat({}); }),
      err<ShapeError>("cat: 0-d", {"cat", "zero-dimensional"}, [] { cat({scalar(1), scalar(2)}); }),
      err<ShapeError>("cat: shapes differ", {"cat", "tensor 1", "[2, 4]"}, [=] { cat({a, ones({2, 4})}, 0); }),
      err<ShapeError>("cat: ranks differ", {"cat", "tensor 1", "[3]"}, [=] { cat({a, ones({3})}, 0); }),
      err<IndexError>("cat: axis out of range", {"cat", "dimension 2", "rank 2"}, [=] { cat({a, a}, 2); }),
      err<ValueError>("cat: undefined member", {"cat", "tensor 1", "undefined"}, [=] { cat({a, Tensor()}); }),
      err<IndexError>("narrow: past the end", {"narrow", "start 2", "length 3"}, [=] { narrow(a, 1, 2, 3); }),
      // Regressions: start + length overflowed int64 and passed the range check (the forward
      // read before the buffer, the backward wrote there); a huge length was bad_alloc.
      err<IndexError>("narrow: start + length overflows", {"narrow", "start 9223372036854775807"},
                      [=] { narrow(a, 0, INT64_MAX, 1); }),
      err<IndexError>("narrow: huge length", {"narrow", "length 9223372036854775807"},
                      [=] { narrow(a, 0, 2, INT64_MAX); }),
      err<IndexError>("narrow: negative length", {"narrow", "-1"}, [=] { narrow(a, 1, 0, -1); }),
      err<ShapeError>("narrow: 0-d", {"narrow", "0-d"}, [] { narrow(scalar(1.0f), 0, 0, 1); }),
      err<IndexError>("slice: dim out of range", {"slice", "2"}, [=] { slice(a, 2, 0, 1); }),
  });
  run_table("indexing", {
      err<IndexError>("index_select: index past the end", {"index_select", "index 5", "position 1"},
                      [=] { index_select(a, 1, Indices{0, 5}); }),
      err<IndexError>("index_select: negative index", {"index_select", "-1"},
                      [=] { index_select(a, 0, Indices{-1}); }),
      err<ShapeError>("index_select: 2-D indices", {"index_select", "1-D", "[1, 2]"},
                      [=] { index_select(a, 0, Indices({0, 1}, {1, 2})); }),
      err<IndexError>("index_select: axis out of range", {"index_select", "dimension 2", "rank 2"},
                      [=] { index_select(a, 2, Indices{0}); }),
      err<IndexError>("embedding: id out of range", {"embedding", "index 4", "position 2"},
                      [] { embedding(ones({4, 2}), Indices{0, 1, 4}); }),
      err<IndexError>("embedding: negative id", {"embedding", "-2"}, [] { embedding(ones({4, 2}), Indices{-2}); }),
      err<ShapeError>("embedding: 1-D weight", {"embedding", "2-D", "[4]"}, [] { embedding(ones({4}), Indices{0}); }),
      err<IndexError>("embedding: padding_idx out of range", {"embedding", "padding_idx", "7"},
                      [] { embedding(ones({4, 2}), Indices{0}, 7); }),
  });
}

// ---- losses, dropout, layer_norm, attention ----------------------------------------------------

TEST(BadInput, NeuralNetworkOps) {
  const Tensor logits = ones({3, 4});
  run_table("losses", {
      err<IndexError>("cross_entropy: class target too large", {"cross_entropy", "target 4", "position 1", "4 classes"},
                      [=] { cross_entropy(logits, Indices{0, 4, 1}); }),
      err<IndexError>("cross_entropy: negative target", {"cross_entropy", "target -1", "position 0"},
                      [=] { cross_entropy(logits, Indices{-1, 0, 0}); }),
      err<ShapeError>("cross_entropy: target count", {"cross_entropy", "[2]", "[3, 4]"},
                      [=] { cross_entropy(logits, Indices{0, 1}); }),
      err<ShapeError>("cross_entropy: 0-d logits", {"cross_entropy", "at least 1 dimension"},
                      [] { cross_entropy(scalar(1.0f), Indices{0}); }),
      err<ShapeError>("cross_entropy: (N, K, d) targets", {"cross_entropy", "[3, 5]", "[3, 4, 2]"},
                      [] { cross_entropy(ones({3, 4, 2}), Indices(std::vector<int64_t>(15, 0), {3, 5})); }),
      err<ValueError>("cross_entropy: label_smoothing 1.5", {"cross_entropy", "label_smoothing", "1.5"},
                      [=] { cross_entropy(logits, Indices{0, 1, 2}, CrossEntropyOptions().label_smoothing(1.5f)); }),
      err<ValueError>("cross_entropy: label_smoothing NaN", {"cross_entropy", "label_smoothing", "nan"},
                      [=] { cross_entropy(logits, Indices{0, 1, 2}, CrossEntropyOptions().label_smoothing(kNaN)); }),
      err<IndexError>("nll_loss: target too large", {"nll_loss", "target 9"},
                      [=] { nll_loss(logits, Indices{0, 9, 1}); }),
      err<ValueError>("nll_loss: label smoothing", {"nll_loss", "label_smoothing"},
                      [=] { nll_loss(logits, Indices{0, 1, 2}, CrossEntropyOptions().label_smoothing(0.1f)); }),
      err<ShapeError>("mse_loss: shapes", {"mse_loss", "[3, 4]", "[4, 3]"}, [=] { mse_loss(logits, ones({4, 3})); }),
  });
  run_table("dropout/layer_norm", {
      err<ValueError>("dropout: p = -0.1", {"dropout", "[0, 1]", "-0.1"}, [] { dropout(ones({2}), -0.1f, true); }),
      err<ValueError>("dropout: p = 1.5", {"dropout", "[0, 1]", "1.5"}, [] { dropout(ones({2}), 1.5f, true); }),
      err<ValueError>("dropout: p = NaN", {"dropout", "nan"}, [] { dropout(ones({2}), kNaN, true); }),
      err<ValueError>("dropout: p = NaN in eval", {"dropout", "nan"}, [] { dropout(ones({2}), kNaN, false); }),
      err<ShapeError>("layer_norm: trailing dims", {"layer_norm", "[2, 3]", "[4]"}, [] { layer_norm(ones({2, 3}), {4}); }),
      err<ShapeError>("layer_norm: weight shape", {"layer_norm", "weight", "[4]", "[3]"},
                      [] { layer_norm(ones({2, 3}), {3}, ones({4})); }),
      err<ShapeError>("layer_norm: bias shape", {"layer_norm", "bias", "[2]"},
                      [] { layer_norm(ones({2, 3}), {3}, ones({3}), ones({2})); }),
      err<ShapeError>("layer_norm: empty normalized_shape", {"layer_norm", "normalized_shape"},
                      [] { layer_norm(ones({2, 3}), {}); }),
      err<ValueError>("layer_norm: negative eps", {"layer_norm", "eps", "-1"},
                      [] { layer_norm(ones({2, 3}), {3}, Tensor(), Tensor(), -1.0f); }),
  });
  const Tensor q = ones({2, 3, 4});
  run_table("attention", {
      err<ShapeError>("sdpa: rank 1", {"scaled_dot_product_attention", "rank >= 2"},
                      [] { scaled_dot_product_attention(ones({4}), ones({4}), ones({4})); }),
      err<ShapeError>("sdpa: ranks differ", {"scaled_dot_product_attention", "same rank"},
                      [=] { scaled_dot_product_attention(q, ones({3, 4}), ones({3, 4})); }),
      err<ShapeError>("sdpa: leading dims", {"scaled_dot_product_attention", "leading dims"},
                      [=] { scaled_dot_product_attention(q, ones({3, 3, 4}), ones({3, 3, 4})); }),
      err<ShapeError>("sdpa: head dims", {"scaled_dot_product_attention", "key last dim 5", "4"},
                      [=] { scaled_dot_product_attention(q, ones({2, 3, 5}), ones({2, 3, 4})); }),
      err<ShapeError>("sdpa: value rows", {"scaled_dot_product_attention", "value", "3"},
                      [=] { scaled_dot_product_attention(q, q, ones({2, 2, 4})); }),
      err<ShapeError>("sdpa: empty", {"scaled_dot_product_attention", "empty"},
                      [] { scaled_dot_product_attention(zeros({2, 0, 4}), zeros({2, 0, 4}), zeros({2, 0, 4})); }),
      err<ShapeError>("sdpa: mask shape", {"scaled_dot_product_attention", "attn_mask", "[5, 5]"},
                      [=] { scaled_dot_product_attention(q, q, q, AttnMask::boolean(zeros({5, 5}))); }),
      err<ValueError>("sdpa: dropout_p 2", {"scaled_dot_product_attention", "dropout_p", "2"},
                      [=] { scaled_dot_product_attention(q, q, q, AttnMask(), false, 2.0f); }),
      err<ValueError>("sdpa: dropout_p NaN", {"scaled_dot_product_attention", "dropout_p", "nan"},
                      [=] { scaled_dot_product_attention(q, q, q, AttnMask(), false, kNaN); }),
      err<ValueError>("sdpa: undefined", {"scaled_dot_product_attention", "defined"},
                      [=] { scaled_dot_product_attention(q, Tensor(), q); }),
  });
}

// ---- modules ---------------------------------------------------------------------------------

TEST(BadInput, Modules) {
  using namespace nn;
  run_table("module options", {
      err<ValueError>("Linear(0, 3)", {"Linear", "positive", "0"}, [] { Linear(0, 3); }),
      err<ValueError>("Linear(3, -2)", {"Linear", "positive", "-2"}, [] { Linear(3, -2); }),
      err<ValueError>("Embedding(0, 4)", {"Embedding", "positive"}, [] { Embedding(0, 4); }),
      err<ValueError>("Embedding padding_idx 10 of 5", {"Embedding", "padding_idx", "10"},
                      [] { Embedding(EmbeddingOptions(5, 2).padding_idx(10)); }),
      err<ValueError>("Embedding padding_idx -6 of 5", {"Embedding", "padding_idx", "-6"},
                      [] { Embedding(EmbeddingOptions(5, 2).padding_idx(-6)); }),
      err<ValueError>("LayerNorm({0})", {"LayerNorm", "normalized_shape", "[0]"}, [] { LayerNorm(LayerNormOptions({0})); }),
      err<ValueError>("LayerNorm({})", {"LayerNorm", "normalized_shape"}, [] { LayerNorm(LayerNormOptions(Shape{})); }),
      err<ValueError>("LayerNorm eps -1", {"LayerNorm", "eps"}, [] { LayerNorm(LayerNormOptions({3}).eps(-1.0f)); }),
      err<ValueError>("Dropout(1.5)", {"Dropout", "[0, 1]", "1.5"}, [] { Dropout(1.5f); }),
      err<ValueError>("Dropout(-0.5)", {"Dropout", "[0, 1]", "-0.5"}, [] { Dropout(-0.5f); }),
      err<ValueError>("Dropout(NaN)", {"Dropout", "nan"}, [] { Dropout{kNaN}; }),
      err<ValueError>("GELU approximate 'fast'", {"GELU", "approximate", "fast"},
                      [] { GELU(GELUOptions().approximate("fast")); }),
      err<ValueError>("MultiheadAttention(10, 3)", {"MultiheadAttention", "num_heads", "3", "10"},
                      [] { MultiheadAttention(10, 3); }),
      err<ValueError>("MultiheadAttention(0, 1)", {"MultiheadAttention", "0"}, [] { MultiheadAttention(0, 1); }),
      err<ValueError>("MultiheadAttention(8, -2)", {"MultiheadAttention", "-2"}, [] { MultiheadAttention(8, -2); }),
      err<ValueError>("MultiheadAttention dropout 1.5", {"MultiheadAttention", "dropout", "1.5"},
                      [] { MultiheadAttention(MultiheadAttentionOptions(8, 2).dropout(1.5f)); }),
      err<ValueError>("FeedForward activation 'swish'", {"FeedForward", "activation", "swish"},
                      [] { FeedForward(FeedForwardOptions(8, 16).activation("swish")); }),
      err<ValueError>("FeedForward d_ff 0", {"FeedForward", "0"}, [] { FeedForward(8, 0); }),
      err<ValueError>("TransformerBlock heads do not divide", {"TransformerBlock", "d_model (8)", "num_heads (3)"},
                      [] { TransformerBlock(TransformerBlockOptions(8, 3, 16)); }),
      err<ValueError>("TransformerBlock dropout -1", {"TransformerBlock", "dropout"},
                      [] { TransformerBlock(TransformerBlockOptions(8, 2, 16).dropout(-1.0f)); }),
      err<ValueError>("RNNCell(0, 4)", {"RNNCell", "0"}, [] { RNNCell(0, 4); }),
      err<ValueError>("RNNCell nonlinearity 'sigmoid'", {"RNNCell", "nonlinearity", "sigmoid"},
                      [] { RNNCell(RNNCellOptions(3, 4).nonlinearity("sigmoid")); }),
      err<ValueError>("LSTMCell(3, 0)", {"LSTMCell", "0"}, [] { LSTMCell(3, 0); }),
      err<ValueError>("GRUCell(-1, 4)", {"GRUCell", "-1"}, [] { GRUCell(-1, 4); }),
      err<ValueError>("RNN num_layers 0", {"RNN", "num_layers", "0"}, [] { RNN(RNNOptions(3, 4).num_layers(0)); }),
      err<ValueError>("LSTM dropout 1", {"LSTM", "dropout", "[0, 1)"}, [] { LSTM(LSTMOptions(3, 4).dropout(1.0f)); }),
      err<ValueError>("GRU dropout NaN", {"GRU", "dropout"}, [] { GRU(GRUOptions(3, 4).dropout(kNaN)); }),
      err<ValueError>("RNN nonlinearity 'gelu'", {"RNN", "nonlinearity", "gelu"},
                      [] { RNN(RNNOptions(3, 4).nonlinearity("gelu")); }),
  });

  auto net = std::make_shared<Net>();
  auto seq = std::make_shared<Sequential>(std::make_shared<Linear>(3, 4), std::make_shared<ReLU>());
  auto emb = std::make_shared<Embedding>(5, 2);
  auto ln = std::make_shared<LayerNorm>(3);
  auto mha = std::make_shared<MultiheadAttention>(8, 2);
  auto block = std::make_shared<TransformerBlock>(TransformerBlockOptions(8, 2, 16));
  auto cell = std::make_shared<RNNCell>(3, 4);
  auto lstm_cell = std::make_shared<LSTMCell>(3, 4);
  auto gru_cell = std::make_shared<GRUCell>(3, 4);
  auto rnn = std::make_shared<RNN>(RNNOptions(3, 4).num_layers(2));
  auto lstm = std::make_shared<LSTM>(3, 4);
  auto gru = std::make_shared<GRU>(GRUOptions(3, 4).batch_first(true));
  const Tensor x8 = ones({2, 5, 8});
  run_table("module forward", {
      err<ShapeError>("Linear: wrong in_features", {"fc1 (Linear 3→4)", "input last dim 5", "expected 3"},
                      [=] { net->fc1->forward(ones({2, 5})); }),
      err<ShapeError>("Linear: 0-d input", {"Linear 3→4", "0-d"}, [=] { net->fc1->forward(scalar(1.0f)); }),
      err<ShapeError>("Sequential: a later layer does not fit", {"2 (Linear 5→2)", "input last dim 4"},
                      [] {
                        Sequential s(std::make_shared<Linear>(3, 4), std::make_shared<ReLU>(),
                                     std::make_shared<Linear>(5, 2));
                        s.forward(ones({2, 3}));
                      }),
      err<ValueError>("Linear: undefined input", {"Linear", "undefined"}, [=] { net->fc1->forward(Tensor()); }),
      err<ShapeError>("Sequential: wrong input", {"0 (Linear 3→4)", "input last dim 2"}, [=] { seq->forward(ones({2, 2})); }),
      err<IndexError>("Sequential[5]", {"Sequential", "5"}, [=] { (*seq)[5]; }),
      err<ValueError>("Sequential::at<Linear>(1) is ReLU", {"Sequential", "1", "ReLU"}, [=] { seq->at<Linear>(1); }),
      err<IndexError>("Embedding: id out of range", {"Embedding 5×2", "id 5", "[0, 5)"}, [=] { emb->forward(Indices{1, 5}); }),
      err<IndexError>("Embedding: negative id", {"Embedding", "id -1"}, [=] { emb->forward(Indices{-1}); }),
      err<ShapeError>("LayerNorm: wrong trailing dim", {"LayerNorm", "[2, 4]", "[3]"}, [=] { ln->forward(ones({2, 4})); }),
      err<ShapeError>("MHA: 2-D query", {"MultiheadAttention", "(B, T, C)", "[5, 8]"},
                      [=] { mha->forward(ones({5, 8}), ones({5, 8}), ones({5, 8})); }),
      err<ShapeError>("MHA: embed dim", {"MultiheadAttention", "[2, 5, 6]"},
                      [=] { mha->forward(ones({2, 5, 6}), ones({2, 5, 6}), ones({2, 5, 6})); }),
      err<ShapeError>("MHA: key/value lengths", {"MultiheadAttention", "[2, 4, 8]"},
                      [=] { mha->forward(x8, x8, ones({2, 4, 8})); }),
      err<ShapeError>("MHA: key_padding_mask shape", {"MultiheadAttention", "key_padding_mask", "[2, 4]"},
                      [=] {
                        mha->forward(x8, x8, x8, AttentionForwardOptions().key_padding_mask(AttnMask::boolean(zeros({2, 4}))));
                      }),
      err<ShapeError>("MHA: attn_mask shape", {"MultiheadAttention", "attn_mask", "[4, 4]"},
                      [=] { mha->forward(x8, x8, x8, AttentionForwardOptions().attn_mask(AttnMask::boolean(zeros({4, 4})))); }),
      err<ShapeError>("TransformerBlock: wrong width", {"TransformerBlock", "[2, 5, 4]"},
                      [=] { block->forward(ones({2, 5, 4})); }),
      err<ShapeError>("RNNCell: input size", {"RNNCell", "[2, 5]", "3"}, [=] { cell->forward(ones({2, 5})); }),
      err<ShapeError>("RNNCell: hidden shape", {"RNNCell", "[2, 3]", "4"}, [=] { cell->forward(ones({2, 3}), ones({2, 3})); }),
      err<ShapeError>("RNNCell: batch of h", {"RNNCell", "[3, 4]"}, [=] { cell->forward(ones({2, 3}), ones({3, 4})); }),
      err<ShapeError>("RNNCell: 3-D input", {"RNNCell", "[1, 2, 3]"}, [=] { cell->forward(ones({1, 2, 3})); }),
      err<ShapeError>("LSTMCell: c shape", {"LSTMCell", "c", "[2, 5]"},
                      [=] { lstm_cell->forward(ones({2, 3}), {ones({2, 4}), ones({2, 5})}); }),
      err<ShapeError>("GRUCell: input size", {"GRUCell", "[2, 4]"}, [=] { gru_cell->forward(ones({2, 4})); }),
      err<ShapeError>("RNN: input size", {"RNN", "[5, 2, 2]"}, [=] { rnn->forward(ones({5, 2, 2})); }),
      err<ShapeError>("RNN: 4-D input", {"RNN", "[1, 5, 2, 3]"}, [=] { rnn->forward(ones({1, 5, 2, 3})); }),
      err<ShapeError>("RNN: h0 layers", {"RNN", "h0", "[1, 2, 4]", "[2, 2, 4]"},
                      [=] { rnn->forward(ones({5, 2, 3}), ones({1, 2, 4})); }),
      err<ShapeError>("LSTM: c0 shape", {"LSTM", "c0", "[1, 3, 4]"},
                      [=] { lstm->forward(ones({5, 2, 3}), {ones({1, 2, 4}), ones({1, 3, 4})}); }),
      err<ShapeError>("GRU (batch_first): h0 batch", {"GRU", "h0", "[1, 5, 4]"},
                      [=] { gru->forward(ones({2, 5, 3}), ones({1, 5, 4})); }),
      err<ShapeError>("RNN: empty sequence", {"RNN", "[0, 2, 3]"}, [=] { rnn->forward(zeros({0, 2, 3})); }),
  });

  run_table("module structure", {
      err<ValueError>("register_parameter: dotted name", {"Net", "name 'a.b'"},
                      [=] { net->register_parameter("a.b", ones({1})); }),
      err<ValueError>("register_parameter: empty name", {"Net", "name ''"}, [=] { net->register_parameter("", ones({1})); }),
      err<ValueError>("register_parameter: duplicate", {"Net", "'fc1'", "already registered"},
                      [=] { net->register_parameter("fc1", ones({1})); }),
      err<ValueError>("register_parameter: undefined", {"Net", "parameter 'w'", "undefined"},
                      [=] { net->register_parameter("w", Tensor()); }),
      err<ValueError>("register_module: null", {"Net", "submodule 'm'", "null"},
                      [=] { net->register_module("m", std::shared_ptr<Linear>()); }),
      err<IndexError>("find: missing key", {"Net", "no parameter or buffer named 'fc1.wieght'"},
                      [=] { net->find("fc1.wieght"); }),
  });
}

// ---- generation: the KV cache, logits processors, generate --------------------------------------

TEST(BadInput, Generation) {
  using namespace tg::nn;
  manual_seed(0);
  auto block = std::make_shared<TransformerBlock>(TransformerBlockOptions(8, 2, 16));
  block->eval();
  auto other = std::make_shared<TransformerBlock>(TransformerBlockOptions(8, 2, 16));
  auto cache = std::make_shared<KVCache>(1, 2, 4);
  const Tensor logits = tensor({{1.0f, 2.0f, 3.0f}, {0.0f, -1.0f, 1.0f}});
  const DecodeFn decoder = [=](const DecodeInput& in) { return zeros({in.ids.shape[0], in.ids.shape[1], 5}); };
  run_table("Generation", {
      err<ValueError>("KVCache(0, 1, 1)", {"KVCache", "positive", "0"}, [] { KVCache(0, 1, 1); }),
      err<ValueError>("KVCache max_length -4", {"KVCache", "-4"}, [] { KVCache(1, 1, -4); }),
      err<ShapeError>("set_left_padding: row count", {"set_left_padding", "3 rows", "batch_size 2"},
                      [=] { cache->set_left_padding({0, 1, 2}); }),
      err<ValueError>("set_left_padding: negative", {"padding of row 1", "-1"}, [=] { cache->set_left_padding({0, -1}); }),
      err<ValueError>("positions(-1)", {"positions", "-1"}, [=] { cache->positions(-1); }),
      err<ValueError>("truncate past the length", {"truncate", "[0, 0]", "3"}, [=] { cache->truncate(3); }),
      err<IndexError>("keys: layer out of range", {"keys", "layer 5", "1 layers"}, [=] { cache->keys(5); }),
      err<ShapeError>("cached block: 2-D input", {"TransformerBlock", "(B, T, 8)", "[2, 8]"},
                      [=] { block->forward(zeros({2, 8}), *cache, 0); }),
      err<ShapeError>("cached attention: T = 0", {"MultiheadAttention", "T >= 1", "[2, 0, 8]"},
                      [=] { block->attn->forward(zeros({2, 0, 8}), *cache, 0); }),
      err<ShapeError>("cached block: batch", {"attn", "input batch 3", "batch_size 2"},
                      [=] { block->forward(zeros({3, 1, 8}), *cache, 0); }),
      err<IndexError>("cached block: layer index", {"KVCache", "layer 1", "1 layers"},
                      [=] { block->forward(zeros({2, 1, 8}), *cache, 1); }),
      err<ValueError>("cached block: capacity", {"attn", "5 new positions after the 0 cached", "max_length 4"},
                      [=] { block->forward(zeros({2, 5, 8}), *cache, 0); }),
      err<ValueError>("cached block: another model's layer", {"layer 0 holds the keys of", "another model"},
                      [=] {
                        KVCache c(1, 2, 4);
                        block->forward(zeros({2, 1, 8}), c, 0);
                        other->forward(zeros({2, 1, 8}), c, 0);
                      }),
      err<ValueError>("set_left_padding after a step", {"set_left_padding", "1 positions"},
                      [=] {
                        KVCache c(1, 2, 4);
                        block->forward(zeros({2, 1, 8}), c, 0);
                        c.set_left_padding({1, 0});
                      }),
      err<ShapeError>("top_k_filter: 1-D logits", {"top_k_filter", "(B, V)", "[3]"},
                      [] { top_k_filter(tensor({1.0f, 2.0f, 3.0f}), 1); }),
      err<ValueError>("top_k_filter: k 0", {"top_k_filter", "k must be >= 1", "0"}, [=] { top_k_filter(logits, 0); }),
      err<ValueError>("top_p_filter: p 0", {"top_p_filter", "(0, 1]"}, [=] { top_p_filter(logits, 0.0f); }),
      err<ValueError>("top_p_filter: p NaN", {"top_p_filter", "nan"}, [=] { top_p_filter(logits, kNaN); }),
      err<ValueError>("top_p_filter: min_tokens_to_keep 0", {"min_tokens_to_keep", "0"},
                      [=] { top_p_filter(logits, 0.5f, 0); }),
      err<ValueError>("repetition_penalty: 0", {"repetition_penalty", "> 0"}, [=] { repetition_penalty(logits, {{0}, {1}}, 0.0f); }),
      err<ValueError>("repetition_penalty: inf", {"repetition_penalty", "inf"}, [=] { repetition_penalty(logits, {{0}, {1}}, kInf); }),
      err<ShapeError>("repetition_penalty: rows", {"repetition_penalty", "1 rows", "2"}, [=] { repetition_penalty(logits, {{0}}, 1.2f); }),
      err<IndexError>("repetition_penalty: token 3 of 3", {"repetition_penalty", "token 3", "vocabulary of 3"},
                      [=] { repetition_penalty(logits, {{0}, {3}}, 1.2f); }),
      err<ValueError>("next_tokens: temperature 0", {"next_tokens", "temperature", "0"},
                      [=] { Generator g(0); next_tokens(logits, {}, SamplingOptions().do_sample(true).temperature(0.0f), g); }),
      err<ValueError>("next_tokens: top_k -1", {"next_tokens", "top_k", "-1"},
                      [=] { Generator g(0); next_tokens(logits, {}, SamplingOptions().top_k(-1), g); }),
      err<ValueError>("next_tokens: sampling a NaN row", {"next_tokens", "cannot sample", "nan"},
                      [] { Generator g(0); next_tokens(tensor({{kNaN, kNaN}}), {}, SamplingOptions().do_sample(true), g); }),
      err<ValueError>("generate: no prompts", {"generate", "no prompts"}, [=] { generate(decoder, {}, GenerateOptions(), cache.get()); }),
      err<ValueError>("generate: an empty prompt", {"generate", "prompt 1 is empty"},
                      [=] { generate(decoder, {{1}, {}}, GenerateOptions(), cache.get()); }),
      err<ValueError>("generate: max_new_tokens -1", {"generate", "max_new_tokens", "-1"},
                      [=] { generate(decoder, {{1}, {2}}, GenerateOptions().max_new_tokens(-1), cache.get()); }),
      err<ValueError>("generate: no cache", {"generate", "no KVCache"}, [=] { generate(decoder, {{1}, {2}}, GenerateOptions()); }),
      err<ShapeError>("generate: batch", {"generate", "3 prompts", "batch_size 2"},
                      [=] { generate(decoder, {{1}, {2}, {3}}, GenerateOptions().max_new_tokens(2), cache.get()); }),
      err<ValueError>("generate: capacity", {"generate", "need 5 cached positions", "max_length 4"},
                      [=] { generate(decoder, {{1, 2}, {3}}, GenerateOptions().max_new_tokens(4), cache.get()); }),
      err<ShapeError>("generate: logits of another batch", {"generate", "[3, 4]", "B = 2, T = 1"},
                      [=] { generate([](const DecodeInput&) { return zeros({3, 4}); }, {{1}, {2}},
                                     GenerateOptions().max_new_tokens(1).use_cache(false)); }),
      err<ValueError>("generate: empty decoder", {"generate", "decoder is empty"},
                      [=] { generate(DecodeFn(), {{1}, {2}}, GenerateOptions(), cache.get()); }),
  });
}

// ---- init ------------------------------------------------------------------------------------

TEST(BadInput, Init) {
  using namespace nn::init;
  run_table("init", {
      err<ValueError>("fans of a 1-D tensor", {"fan", "[5]"}, [] { calculate_fan_in_and_fan_out(ones({5})); }),
      err<ValueError>("xavier_uniform_ on a 1-D tensor", {"xavier_uniform_", "[5]"}, [] { xavier_uniform_(ones({5})); }),
      err<ValueError>("kaiming_normal_ on a 0-d tensor", {"kaiming_normal_", "[]"}, [] { kaiming_normal_(scalar(1.0f)); }),
      err<ValueError>("calculate_gain: unknown", {"calculate_gain", "swish"}, [] { calculate_gain("swish"); }),
      err<ValueError>("uniform_: a > b", {"uniform_", "2", "1"}, [] { uniform_(ones({3}), 2.0f, 1.0f); }),
      err<ValueError>("normal_: negative std", {"normal_", "std", "-1"}, [] { normal_(ones({3}), 0.0f, -1.0f); }),
      err<ValueError>("uniform_: NaN bound", {"uniform_", "nan"}, [] { uniform_(ones({3}), kNaN, 1.0f); }),
      err<ValueError>("normal_: NaN mean", {"normal_", "mean", "nan"}, [] { normal_(ones({3}), kNaN, 1.0f); }),
      err<ValueError>("uniform_: infinite bound", {"uniform_", "finite"}, [] { uniform_(ones({3}), -kInf, 1.0f); }),
      err<ValueError>("kaiming_uniform_: zero fan", {"kaiming_uniform_", "fan is zero", "[3, 0]"}, [] { kaiming_uniform_(zeros({3, 0})); }),
  });
}

// ---- optimizers, schedulers, clipping --------------------------------------------------------

TEST(BadInput, OptimizersAndSchedulers) {
  using namespace optim;
  const Tensor w = ones({2}, true);
  run_table("optimizer options", {
      err<ValueError>("SGD lr -0.1", {"SGD", "lr", "-0.1"}, [=] { SGD({w}, SGDOptions(-0.1)); }),
      err<ValueError>("SGD lr NaN", {"SGD", "lr", "nan"}, [=] { SGD({w}, SGDOptions(std::nan(""))); }),
      err<ValueError>("SGD lr inf", {"SGD", "lr", "inf"}, [=] { SGD({w}, SGDOptions(HUGE_VAL)); }),
      err<ValueError>("SGD momentum -1", {"SGD", "momentum", "-1"}, [=] { SGD({w}, SGDOptions(0.1).momentum(-1)); }),
      err<ValueError>("SGD nesterov without momentum", {"SGD", "nesterov"}, [=] { SGD({w}, SGDOptions(0.1).nesterov(true)); }),
      err<ValueError>("SGD weight_decay -1", {"SGD", "weight_decay"}, [=] { SGD({w}, SGDOptions(0.1).weight_decay(-1)); }),
      err<ValueError>("Adam lr -1", {"Adam", "lr", "-1"}, [=] { Adam({w}, AdamOptions(-1)); }),
      err<ValueError>("Adam beta1 1", {"Adam", "beta1", "[0, 1)"}, [=] { Adam({w}, AdamOptions().betas({1.0, 0.999})); }),
      err<ValueError>("Adam beta2 -0.1", {"Adam", "beta2"}, [=] { Adam({w}, AdamOptions().betas({0.9, -0.1})); }),
      err<ValueError>("Adam eps NaN", {"Adam", "eps", "nan"}, [=] { Adam({w}, AdamOptions().eps(std::nan(""))); }),
      err<ValueError>("AdamW weight_decay -1", {"AdamW", "weight_decay"}, [=] { AdamW({w}, AdamWOptions().weight_decay(-1)); }),
      err<ValueError>("RMSprop alpha -1", {"RMSprop", "alpha"}, [=] { RMSprop({w}, RMSpropOptions().alpha(-1)); }),
      err<ValueError>("RMSprop momentum inf", {"RMSprop", "momentum", "inf"}, [=] { RMSprop({w}, RMSpropOptions().momentum(HUGE_VAL)); }),
      err<ValueError>("optimizer: no parameters", {"SGD", "empty"}, [] { SGD(std::vector<Tensor>{}, SGDOptions(0.1)); }),
      err<ValueError>("optimizer: no groups", {"Adam", "empty"}, [] { Adam(std::vector<ParamGroup>{}); }),
      err<ValueError>("optimizer: undefined parameter", {"SGD", "parameter 1", "undefined"},
                      [=] { SGD({w, Tensor()}, SGDOptions(0.1)); }),
      err<ValueError>("optimizer: non-leaf parameter", {"SGD", "parameter 0", "leaf"},
                      [=] { SGD({w * 2.0f}, SGDOptions(0.1)); }),
      err<ValueError>("optimizer: parameter twice", {"SGD", "parameter 1"}, [=] { SGD({w, w}, SGDOptions(0.1)); }),
      err<ValueError>("group override: unknown option", {"Adam", "param group 0", "'momentum'"},
                      [=] { Adam({ParamGroup({w}, {{"momentum", 0.9}})}); }),
      err<ValueError>("group override: lr -1", {"Adam", "param group 0", "lr"},
                      [=] { Adam({ParamGroup({w}, {{"lr", -1.0}})}); }),
      err<ValueError>("group options of another optimizer", {"SGD", "options are for Adam"},
                      [=] { SGD({ParamGroup({w}, AdamOptions())}, SGDOptions(0.1)); }),
  });

  auto make_sgd = [] { return std::make_shared<SGD>(std::vector<Tensor>{ones({2}, true)}, SGDOptions(0.1)); };
  run_table("optimizer state", {
      err<CheckpointError>("load_state_dict: another optimizer", {"SGD", "type", "Adam"},
                           [=] {
                             Adam adam({ones({2}, true)});
                             make_sgd()->load_state_dict(adam.state_dict());
                           }),
      err<CheckpointError>("load_state_dict: empty", {"SGD", "type"}, [=] { make_sgd()->load_state_dict(StateDict()); }),
      err<CheckpointError>("load_state_dict: negative lr", {"SGD", "group 0", "lr"},
                           [=] {
                             auto opt = make_sgd();
                             StateDict s = opt->state_dict();
                             s.numbers["param_groups.0.lr"] = -1;
                             opt->load_state_dict(s);
                           }),
      err<CheckpointError>("load_state_dict: state of the wrong shape", {"SGD", "state.0.momentum_buffer", "[3]", "[2]"},
                           [=] {
                             auto opt = std::make_shared<SGD>(std::vector<Tensor>{ones({2}, true)}, SGDOptions(0.1).momentum(0.9));
                             StateDict s = opt->state_dict();
                             s.tensors["state.0.momentum_buffer"] = zeros({3});
                             opt->load_state_dict(s);
                           }),
  });

  run_table("schedulers", {
      err<ValueError>("StepLR step_size 0", {"StepLR", "step_size", "0"}, [=] { StepLR(*make_sgd(), 0); }),
      err<ValueError>("StepLR gamma -1", {"StepLR", "gamma"}, [=] { StepLR(*make_sgd(), 2, -1.0); }),
      err<ValueError>("StepLR gamma NaN", {"StepLR", "gamma", "nan"}, [=] { StepLR(*make_sgd(), 2, std::nan("")); }),
      err<ValueError>("CosineAnnealingLR T_max 0", {"CosineAnnealingLR", "T_max", "0"}, [=] { CosineAnnealingLR(*make_sgd(), 0); }),
      err<ValueError>("CosineAnnealingLR eta_min -1", {"CosineAnnealingLR", "eta_min"},
                      [=] { CosineAnnealingLR(*make_sgd(), 10, -1.0); }),
      err<ValueError>("LambdaLR: empty function", {"LambdaLR", "empty"}, [=] { LambdaLR(*make_sgd(), nullptr); }),
      err<ValueError>("LambdaLR: NaN factor", {"LambdaLR", "nan"},
                      [=] { LambdaLR(*make_sgd(), [](int64_t) { return std::nan(""); }); }),
      err<ValueError>("WarmupCosineLR warmup -1", {"WarmupCosineLR", "warmup_steps"}, [=] { WarmupCosineLR(*make_sgd(), -1, 10); }),
      err<ValueError>("WarmupCosineLR total <= warmup", {"WarmupCosineLR", "total_steps"}, [=] { WarmupCosineLR(*make_sgd(), 10, 10); }),
      err<ValueError>("WarmupCosineLR ratio 2", {"WarmupCosineLR", "min_lr_ratio", "2"}, [=] { WarmupCosineLR(*make_sgd(), 1, 10, 2.0); }),
      err<CheckpointError>("scheduler: another scheduler's state", {"StepLR", "CosineAnnealingLR"},
                           [=] {
                             auto opt = make_sgd();
                             CosineAnnealingLR cos(*opt, 10);
                             StepLR(*opt, 2).load_state_dict(cos.state_dict());
                           }),
  });

  run_table("clipping", {
      err<ValueError>("clip_grad_norm_: norm_type 0", {"clip_grad_norm_", "norm_type"},
                      [=] { nn::utils::clip_grad_norm_({w}, 1.0, 0.0); }),
      err<ValueError>("clip_grad_norm_: max_norm NaN", {"clip_grad_norm_", "max_norm", "nan"},
                      [=] { nn::utils::clip_grad_norm_({w}, std::nan("")); }),
      err<ValueError>("clip_grad_norm_: max_norm -1", {"clip_grad_norm_", "max_norm", "-1"},
                      [=] { nn::utils::clip_grad_norm_({w}, -1.0); }),
      err<ValueError>("clip_grad_norm_: non-finite gradient", {"clip_grad_norm_", "inf", "error_if_nonfinite"},
                      [] {
                        Tensor p = ones({2}, true);
                        p.set_grad(tensor(std::vector<float>{1.0f, kInf}, Shape{2}));
                        nn::utils::clip_grad_norm_({p}, 1.0, 2.0, /*error_if_nonfinite=*/true);
                      }),
      err<ValueError>("clip_grad_value_: negative", {"clip_grad_value_", "-1"},
                      [=] { nn::utils::clip_grad_value_({w}, -1.0); }),
      err<ValueError>("clip_grad_value_: NaN", {"clip_grad_value_", "nan"},
                      [=] { nn::utils::clip_grad_value_({w}, std::nan("")); }),
  });
}

// ---- files: checkpoints and npz --------------------------------------------------------------

TEST(BadInput, Files) {
  const std::string dir = scratch();
  const std::string missing = dir + "/does_not_exist.ckpt";
  const std::string garbage = dir + "/garbage.ckpt";
  write_file(garbage, "this is not a checkpoint, just some text that is long enough");
  const std::string empty = dir + "/empty.ckpt";
  write_file(empty, "");
  const std::string good = dir + "/good.ckpt";
  save(Net(), good);
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string truncated = dir + "/truncated.ckpt";
  write_file(truncated, bytes.substr(0, bytes.size() / 2));
  std::string flipped_bytes = bytes;
  flipped_bytes[bytes.size() - 3] ^= 0x10;
  const std::string flipped = dir + "/flipped.ckpt";
  write_file(flipped, flipped_bytes);
  const std::string good_npz = dir + "/good.npz";
  export_npz(Net(), good_npz);
  const std::string other_npz = dir + "/other.npz";
  write_npz(other_npz, {{"fc1.weight", ones({4, 2})}});

  const std::string fifo = dir + "/a.fifo";
  ::mkfifo(fifo.c_str(), 0600);  // opening it for reading would wait for a writer

  run_table("checkpoint files", {
      err<IOError>("load: a FIFO (does not hang)", {"a.fifo", "not a regular file"}, [=] { Checkpoint::load(fifo); }),
      err<IOError>("load: missing file", {"does_not_exist.ckpt"}, [=] { Net n; load(n, missing); }),
      err<IOError>("load: a directory", {dir, "directory"}, [=] { Net n; load(n, dir); }),
      err<IOError>("Checkpoint::load: a directory", {dir, "directory"}, [=] { Checkpoint::load(dir); }),
      err<IOError>("Checkpoint::load: missing file", {"does_not_exist.ckpt"}, [=] { Checkpoint::load(missing); }),
      err<CheckpointError>("load: not a checkpoint", {"garbage.ckpt", "not a tapegrad checkpoint"}, [=] { Checkpoint::load(garbage); }),
      err<CheckpointError>("load: empty file", {"empty.ckpt", "0 bytes"}, [=] { Checkpoint::load(empty); }),
      err<CheckpointError>("load: truncated", {"truncated.ckpt"}, [=] { Checkpoint::load(truncated); }),
      err<CheckpointError>("load: a flipped bit", {"flipped.ckpt", "CRC"}, [=] { Checkpoint::load(flipped); }),
      err<CheckpointError>("load: into another model", {"fc1.weight", "[4, 3]", "[8, 3]"},
                           [=] {
                             nn::Module m("Other");
                             m.register_module("fc1", std::make_shared<nn::Linear>(3, 8));
                             m.register_module("fc2", std::make_shared<nn::Linear>(8, 2));
                             load(m, good);
                           }),
      err<IOError>("save: into a missing folder", {dir + "/no/such/folder/x.ckpt"},
                   [=] { save(Net(), dir + "/no/such/folder/x.ckpt"); }),
      err<IOError>("save: onto a directory", {dir}, [=] { save(Net(), dir); }),
      err<CheckpointError>("Checkpoint::get: missing state", {"optimizer"}, [] { Checkpoint().get("optimizer"); }),
      err<CheckpointError>("Checkpoint::model_tensor: missing", {"fc9.weight"}, [] { Checkpoint().model_tensor("fc9.weight"); }),
      err<CheckpointError>("deserialize: empty payload", {"payload"}, [] { Checkpoint::deserialize(""); }),
  });
  run_table("npz files", {
      err<IOError>("read_npz: missing file", {"does_not_exist.npz"}, [=] { read_npz(dir + "/does_not_exist.npz"); }),
      err<IOError>("read_npz: a directory", {dir, "directory"}, [=] { read_npz(dir); }),
      err<IOError>("import_npz: a directory", {dir, "directory"}, [=] { Net n; import_npz(n, dir); }),
      err<CheckpointError>("read_npz: not a zip", {"garbage.ckpt"}, [=] { read_npz(garbage); }),
      err<CheckpointError>("read_npz: empty file", {"empty.ckpt"}, [=] { read_npz(empty); }),
      err<CheckpointError>("read_npz: a checkpoint", {"good.ckpt"}, [=] { read_npz(good); }),
      err<CheckpointError>("import_npz: wrong shapes and missing keys", {"fc1.weight", "[4, 2]", "fc2.bias"},
                           [=] { Net n; import_npz(n, other_npz); }),
      err<IOError>("write_npz: into a missing folder", {"no/such/folder"},
                   [=] { write_npz(dir + "/no/such/folder/a.npz", {{"a", ones({1})}}); }),
      err<ValueError>("write_npz: undefined tensor", {"write_npz", "'a'", "undefined"},
                      [=] { write_npz(dir + "/a.npz", {{"a", Tensor()}}); }),
  });
}

// ---- data ------------------------------------------------------------------------------------

TEST(BadInput, Data) {
  using namespace data;
  const TensorDataset ds({ones({10, 3})}, Indices(std::vector<int64_t>(10, 1), {10}));
  run_table("data", {
      err<ValueError>("DataLoader batch_size 0", {"DataLoader", "batch_size", "0"},
                      [=] { DataLoader<TensorDataset>(ds, DataLoaderOptions(0)); }),
      err<ValueError>("DataLoader batch_size -4", {"DataLoader", "batch_size", "-4"},
                      [=] { DataLoader<TensorDataset>(ds, DataLoaderOptions(-4)); }),
      err<ValueError>("DataLoader shard rank 2 of 2", {"DataLoader", "shard", "rank"},
                      [=] { DataLoader<TensorDataset>(ds, DataLoaderOptions(2).shard(2, 2)); }),
      err<ValueError>("DataLoader shard world_size 0", {"DataLoader", "world_size"},
                      [=] { DataLoader<TensorDataset>(ds, DataLoaderOptions(2).shard(0, 0)); }),
      err<ValueError>("DataLoader sharded shuffle without a seed", {"DataLoader", "seed"},
                      [=] { DataLoader<TensorDataset>(ds, DataLoaderOptions(2).shuffle(true).shard(0, 2)); }),
      err<ShapeError>("TensorDataset: sample counts differ", {"TensorDataset", "10", "9"},
                      [] { TensorDataset({ones({10, 3}), ones({9, 2})}); }),
      err<ShapeError>("TensorDataset: target count", {"TensorDataset", "targets", "4"},
                      [] { TensorDataset({ones({10, 3})}, Indices{0, 1, 2, 3}); }),
      err<ShapeError>("TensorDataset: 0-d tensor", {"TensorDataset", "0-d"}, [] { TensorDataset({scalar(1.0f)}); }),
      err<ValueError>("TensorDataset: undefined tensor", {"TensorDataset", "undefined"}, [] { TensorDataset({Tensor()}); }),
      err<IndexError>("TensorDataset::get_batch: index 10 of 10", {"TensorDataset", "10"}, [=] { ds.get_batch({0, 10}); }),
      err<IndexError>("TensorDataset::get_batch: index -1", {"TensorDataset", "-1"}, [=] { ds.get_batch({-1}); }),
      err<ShapeError>("SequenceDataset: label count", {"SequenceDataset", "2", "1"},
                      [] { SequenceDataset({{1, 2}, {3}}, {0}); }),
      err<IndexError>("SequenceDataset::get_batch: out of range", {"SequenceDataset", "5"},
                      [] { SequenceDataset({{1, 2}, {3}}).get_batch({5}); }),
      err<IndexError>("SequenceDataset::sequence: out of range", {"SequenceDataset", "2"},
                      [] { SequenceDataset({{1, 2}, {3}}).sequence(2); }),
      err<CheckpointError>("DataLoader state for another batch size", {"DataLoader", "batch_size"},
                           [=] {
                             DataLoader<TensorDataset> a(ds, DataLoaderOptions(2)), b(ds, DataLoaderOptions(3));
                             b.load_state_dict(a.state_dict());
                           }),
      err<CheckpointError>("DataLoader state: not a permutation", {"DataLoader", "permutation"},
                           [=] {
                             DataLoader<TensorDataset> a(ds, DataLoaderOptions(2).shuffle(true).seed(1));
                             a.begin();
                             StateDict s = a.state_dict();
                             s.tensors["permutation"].data()[0] = s.tensors["permutation"].data()[1];
                             a.load_state_dict(s);
                           }),
      err<CheckpointError>("DataLoader state: empty", {"DataLoader", "type"},
                           [=] { DataLoader<TensorDataset>(ds, DataLoaderOptions(2)).load_state_dict(StateDict()); }),
  });
}

// ---- defined behaviour: empty tensors, NaN and Inf ---------------------------------------------

TEST(BadInput, EmptyTensorsFollowPyTorch) {
  run_defined("empty tensors", {
      {"add of empty tensors", [] { EXPECT_EQ(add(zeros({0, 3}), ones({3})).shape(), (Shape{0, 3})); }},
      {"exp of an empty tensor", [] { EXPECT_EQ(exp(zeros({0})).numel(), 0); }},
      {"sum of an empty tensor is 0", [] { EXPECT_EQ(sum(zeros({0, 3})).item(), 0.0f); }},
      {"sum over an empty dim", [] { EXPECT_EQ(sum(zeros({2, 0}), {1}).to_vector(), (std::vector<float>{0, 0})); }},
      {"matmul with zero rows", [] { EXPECT_EQ(matmul(zeros({0, 3}), ones({3, 2})).shape(), (Shape{0, 2})); }},
      {"matmul with zero inner dim gives zeros",
       [] { EXPECT_EQ(matmul(zeros({2, 0}), zeros({0, 3})).to_vector(), std::vector<float>(6, 0.0f)); }},
      {"linear on an empty batch", [] { EXPECT_EQ(linear(zeros({0, 3}), ones({4, 3}), ones({4})).shape(), (Shape{0, 4})); }},
      {"reshape of an empty tensor", [] { EXPECT_EQ(reshape(zeros({0, 3}), {3, 0}).shape(), (Shape{3, 0})); }},
      {"transpose of an empty tensor", [] { EXPECT_EQ(transpose(zeros({0, 3}), 0, 1).shape(), (Shape{3, 0})); }},
      {"cat with an empty part", [] { EXPECT_EQ(cat({zeros({0, 3}), ones({2, 3})}, 0).shape(), (Shape{2, 3})); }},
      {"arange with an empty range (numpy)", [] { EXPECT_EQ(arange(int64_t{-3}).numel(), 0); }},
      {"layer_norm over a zero-size normalized dim", [] { EXPECT_EQ(layer_norm(zeros({2, 0}), {0}).shape(), (Shape{2, 0})); }},
      {"xavier_uniform_ of an empty weight is a no-op", [] { EXPECT_EQ(nn::init::xavier_uniform_(zeros({0, 3})).numel(), 0); }},
      {"a TensorDataset with zero-width rows", [] {
         data::TensorDataset ds({zeros({4, 0})});
         EXPECT_EQ(ds.get_batch({1, 3}).tensors[0].shape(), (Shape{2, 0}));
       }},
      {"get_batch of nothing from an empty TensorDataset", [] {
         data::TensorDataset ds({zeros({0, 3})});
         EXPECT_EQ(ds.get_batch({}).tensors[0].shape(), (Shape{0, 3}));
       }},
      {"narrow to length 0", [] { EXPECT_EQ(narrow(ones({2, 3}), 1, 3, 0).shape(), (Shape{2, 0})); }},
      {"index_select with no indices", [] { EXPECT_EQ(index_select(ones({2, 3}), 0, Indices(std::vector<int64_t>{}, {0})).shape(), (Shape{0, 3})); }},
      {"embedding of no ids", [] { EXPECT_EQ(embedding(ones({4, 2}), Indices(std::vector<int64_t>{}, {0})).shape(), (Shape{0, 2})); }},
      {"softmax over an empty dim", [] { EXPECT_EQ(softmax(zeros({3, 0}), 1).shape(), (Shape{3, 0})); }},
      {"softmax of an empty batch", [] { EXPECT_EQ(softmax(zeros({0, 4}), 1).shape(), (Shape{0, 4})); }},
      {"layer_norm of an empty batch", [] { EXPECT_EQ(layer_norm(zeros({0, 4}), {4}).shape(), (Shape{0, 4})); }},
      {"dropout of an empty tensor", [] { EXPECT_EQ(dropout(zeros({0, 4}), 0.5f, true).shape(), (Shape{0, 4})); }},
      {"Linear on an empty batch, with backward",
       [] {
         nn::Linear lin(3, 2);
         Tensor x = zeros({0, 3}, true);
         sum(lin.forward(x)).backward();
         EXPECT_EQ(lin.weight.grad().to_vector(), std::vector<float>(6, 0.0f));
         EXPECT_EQ(x.grad().shape(), (Shape{0, 3}));
       }},
      {"cross_entropy sum over an empty batch is 0",
       [] {
         EXPECT_EQ(cross_entropy(zeros({0, 4}), Indices(std::vector<int64_t>{}, {0}),
                                 CrossEntropyOptions().reduction(Reduction::Sum)).item(), 0.0f);
       }},
      {"cross_entropy mean over an empty batch is NaN (PyTorch)",
       [] { EXPECT_TRUE(std::isnan(cross_entropy(zeros({0, 4}), Indices(std::vector<int64_t>{}, {0})).item())); }},
      {"cross_entropy mean with every target ignored is NaN (PyTorch)",
       [] { EXPECT_TRUE(std::isnan(cross_entropy(ones({2, 4}), Indices{-100, -100}).item())); }},
      {"mse_loss of empty tensors is NaN (PyTorch)", [] { EXPECT_TRUE(std::isnan(mse_loss(zeros({0}), zeros({0})).item())); }},
      {"an optimizer step over an empty parameter",
       [] {
         Tensor p = zeros({0, 3}, true);
         p.set_grad(zeros({0, 3}));
         optim::Adam opt({p});
         opt.step();
         EXPECT_EQ(p.shape(), (Shape{0, 3}));
       }},
      {"clip_grad_norm_ with no gradients returns 0", [] { EXPECT_EQ(nn::utils::clip_grad_norm_({ones({2}, true)}, 1.0), 0.0); }},
      {"a DataLoader over an empty dataset has no batches",
       [] {
         data::DataLoader<data::TensorDataset> loader(data::TensorDataset({zeros({0, 3})}), data::DataLoaderOptions(4));
         EXPECT_EQ(loader.num_batches(), 0);
         int n = 0;
         for (const auto& b : loader) n += static_cast<int>(b.tensors.size());
         EXPECT_EQ(n, 0);
       }},
      {"save and load a model with an empty parameter",
       [] {
         nn::Module m("M");
         m.register_parameter("w", zeros({0, 3}));
         const std::string path = scratch() + "/empty_param.ckpt";
         save(m, path);
         EXPECT_TRUE(load(m, path).ok());
       }},
  });
}

TEST(BadInput, NaNAndInfPropagateLikePyTorch) {
  // NaN and Inf are values, not errors: ops compute with them as IEEE-754 (and PyTorch) do.
  // tg::detect_anomaly finds the op that first made one; clip_grad_norm_(error_if_nonfinite)
  // refuses them.
  const Tensor n = tensor(std::vector<float>{1.0f, kNaN, -2.0f}, Shape{3});
  const Tensor i = tensor(std::vector<float>{1.0f, kInf, -kInf}, Shape{3});
  run_defined("NaN and Inf", {
      {"add propagates NaN", [=] { EXPECT_TRUE(std::isnan((n + 1.0f).to_vector()[1])); }},
      {"exp(inf) = inf, exp(-inf) = 0", [=] { EXPECT_EQ(exp(i).to_vector(), (std::vector<float>{std::exp(1.0f), kInf, 0.0f})); }},
      {"log(0) = -inf, log(-1) = NaN",
       [] {
         auto v = log(tensor(std::vector<float>{0.0f, -1.0f}, Shape{2})).to_vector();
         EXPECT_EQ(v[0], -kInf);
         EXPECT_TRUE(std::isnan(v[1]));
       }},
      {"sqrt(-1) = NaN", [] { EXPECT_TRUE(std::isnan(sqrt(tensor(std::vector<float>{-1.0f}, Shape{1})).item())); }},
      {"1/0 = inf", [] { EXPECT_EQ(rdiv(1.0f, zeros({1})).item(), kInf); }},
      {"inf - inf = NaN", [=] { EXPECT_TRUE(std::isnan((i - i).to_vector()[1])); }},
      {"tanh(±inf) = ±1", [=] { EXPECT_EQ(tanh(i).to_vector(), (std::vector<float>{std::tanh(1.0f), 1.0f, -1.0f})); }},
      {"sigmoid(±inf) = 1, 0", [=] { auto v = sigmoid(i).to_vector(); EXPECT_EQ(v[1], 1.0f); EXPECT_EQ(v[2], 0.0f); }},
      {"relu(NaN) = NaN", [=] { EXPECT_TRUE(std::isnan(relu(n).to_vector()[1])); }},
      {"relu passes no gradient to NaN", [=] {
         Tensor x = n.detach().requires_grad_();
         sum(relu(x)).backward();
         EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{1.0f, 0.0f, 0.0f}));
       }},
      {"gelu, sigmoid, tanh, abs, pow, exp of NaN are NaN", [=] {
         for (const Tensor& y : {gelu(n), gelu(n, true), sigmoid(n), tanh(n), abs(n), pow(n, 2.0f), exp(n), sqrt(n)})
           EXPECT_TRUE(std::isnan(y.to_vector()[1])) << y.op_name();
       }},
      {"nn::ReLU and a relu RNN propagate NaN", [=] {
         EXPECT_TRUE(std::isnan(nn::ReLU().forward(n).to_vector()[1]));
         nn::RNN rnn(nn::RNNOptions(3, 2).nonlinearity("relu"));
         EXPECT_TRUE(all_nan(rnn.forward(reshape(n, {1, 1, 3})).output));
       }},
      {"sum with a NaN is NaN", [=] { EXPECT_TRUE(std::isnan(sum(n).item())); }},
      {"mean with an inf is inf", [] { EXPECT_EQ(mean(tensor(std::vector<float>{1.0f, kInf}, Shape{2})).item(), kInf); }},
      {"max picks NaN (PyTorch)", [=] { EXPECT_TRUE(std::isnan(std::get<0>(max(n, 0)).item())); }},
      {"matmul propagates NaN to its row", [=] {
         Tensor y = matmul(reshape(n, {3, 1}), ones({1, 2}));
         auto v = y.to_vector();
         EXPECT_FALSE(std::isnan(v[0]));
         EXPECT_TRUE(std::isnan(v[2]) && std::isnan(v[3]));
       }},
      {"softmax row with a NaN is all NaN", [=] { EXPECT_TRUE(all_nan(softmax(n, 0))); }},
      {"softmax row with +inf is NaN (inf/inf, PyTorch)", [] { EXPECT_TRUE(any_nan(softmax(tensor(std::vector<float>{0.0f, kInf}, Shape{2}), 0))); }},
      {"softmax row with -inf entries ignores them", [] {
         EXPECT_EQ(softmax(tensor(std::vector<float>{0.0f, -kInf}, Shape{2}), 0).to_vector(), (std::vector<float>{1.0f, 0.0f}));
       }},
      {"log_softmax of a NaN row is NaN", [=] { EXPECT_TRUE(all_nan(log_softmax(n, 0))); }},
      {"layer_norm of a row with a NaN is all NaN", [=] { EXPECT_TRUE(all_nan(layer_norm(reshape(n, {1, 3}), {3}))); }},
      {"layer_norm of a row with inf is NaN", [=] { EXPECT_TRUE(any_nan(layer_norm(reshape(i, {1, 3}), {3}))); }},
      {"cross_entropy with NaN logits is NaN", [=] {
         EXPECT_TRUE(std::isnan(cross_entropy(reshape(n, {1, 3}), Indices{0}).item()));
       }},
      {"cross_entropy with +inf on the target is NaN (inf - inf)", [] {
         EXPECT_TRUE(std::isnan(cross_entropy(tensor({{0.0f, kInf}}), Indices{1}).item()));
       }},
      {"cross_entropy with -inf on another class is finite", [] {
         EXPECT_NEAR(cross_entropy(tensor({{0.0f, -kInf}}), Indices{0}).item(), 0.0f, 1e-6);
       }},
      {"mse_loss with an inf is inf", [=] { EXPECT_EQ(mse_loss(reshape(i, {3}), zeros({3}), Reduction::Sum).item(), kInf); }},
      {"NaN gradients flow back as NaN", [] {
         Tensor x = tensor(std::vector<float>{1.0f, 2.0f}, Shape{2}, true);
         sum(x * tensor(std::vector<float>{kNaN, 1.0f}, Shape{2})).backward();
         auto g = x.grad().to_vector();
         EXPECT_TRUE(std::isnan(g[0]));
         EXPECT_EQ(g[1], 1.0f);
       }},
      {"an SGD step with a NaN gradient makes that weight NaN", [] {
         Tensor p = ones({2}, true);
         p.set_grad(tensor(std::vector<float>{kNaN, 1.0f}, Shape{2}));
         optim::SGD opt({p}, optim::SGDOptions(0.1));
         opt.step();
         EXPECT_TRUE(std::isnan(p.to_vector()[0]));
         EXPECT_FLOAT_EQ(p.to_vector()[1], 0.9f);
       }},
      {"clip_grad_norm_ of a NaN gradient returns NaN", [] {
         Tensor p = ones({2}, true);
         p.set_grad(tensor(std::vector<float>{kNaN, 1.0f}, Shape{2}));
         EXPECT_TRUE(std::isnan(nn::utils::clip_grad_norm_({p}, 1.0)));
       }},
      {"Linear on a NaN input gives NaN in that row only", [] {
         nn::Linear lin(2, 3);
         Tensor y = lin.forward(tensor({{kNaN, 0.0f}, {1.0f, 2.0f}}));
         auto v = y.to_vector();
         EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]) && std::isnan(v[2]));
         EXPECT_TRUE(all_finite(narrow(y, 0, 1, 1)));
       }},
      {"checkpoints store NaN and inf exactly", [] {
         nn::Module m("M");
         Tensor w = m.register_parameter("w", tensor(std::vector<float>{kNaN, kInf, -kInf}, Shape{3}));
         const std::string path = scratch() + "/nan.ckpt";
         save(m, path);
         w.data().fill(0.0f);
         load(m, path);
         auto v = w.to_vector();
         EXPECT_TRUE(std::isnan(v[0]));
         EXPECT_EQ(v[1], kInf);
         EXPECT_EQ(v[2], -kInf);
       }},
  });
}

namespace {
/// Prints the number of cases run by this process (all of them when the binary runs whole).
struct CountCases : ::testing::Environment {
  void TearDown() override { std::printf("[bad input] total: %d cases\n", g_total_cases); }
};
const auto* const count_cases = ::testing::AddGlobalTestEnvironment(new CountCases);
}  // namespace
