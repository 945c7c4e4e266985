// The core ops against PyTorch 1.13: forward values and input gradients, to about 1e-5.
// The cases are written by tests/reference/make_ops.py into tests/fixtures/ops/ (see its header
// for the file naming): for each one we load the inputs, run the same op, compare y, call
// backward with the saved upstream gradient g, and compare every input's .grad().
#include <functional>
#include <string>
#include <vector>

#include "reference.h"

using namespace tg;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

std::string file(const std::string& name, const std::string& key) {
  return "ops/" + name + "." + key + ".npy";
}

/// Loads inputs `keys` of case `name`, checks y = fn(inputs) and d(key) after backward(g).
void check_case(const std::string& name, const std::vector<std::string>& keys, const Fn& fn,
                double atol = 1e-5, double rtol = 1e-5) {
  SCOPED_TRACE("case " + name);
  std::vector<Tensor> in;
  for (const auto& k : keys) in.push_back(ref::load(file(name, k), true));
  Tensor y = fn(in);
  EXPECT_TRUE(ref::close(y, ref::load(file(name, "y")), atol, rtol)) << "forward";
  y.backward(ref::load(file(name, "g")));
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_TRUE(ref::close(in[i].grad(), ref::load(file(name, "d" + keys[i])), atol, rtol))
        << "gradient of " << keys[i];
}

Indices idx(const std::string& name, const std::string& key = "t") {
  return ref::load_indices(file(name, key));
}

}  // namespace

TEST(OpsReference, SoftmaxStableForLargeLogits) {
  check_case("softmax_big", {"x"}, [](auto& v) { return softmax(v[0], -1); });
  check_case("log_softmax_big", {"x"}, [](auto& v) { return log_softmax(v[0], -1); });
}

TEST(OpsReference, SoftmaxOtherAxes) {
  check_case("softmax_axis1", {"x"}, [](auto& v) { return softmax(v[0], 1); });
  check_case("log_softmax_axis0", {"x"}, [](auto& v) { return log_softmax(v[0], 0); });
}

TEST(OpsReference, Gelu) {
  check_case("gelu_exact", {"x"}, [](auto& v) { return gelu(v[0]); });
  check_case("gelu_tanh", {"x"}, [](auto& v) { return gelu(v[0], true); });
}

TEST(OpsReference, LayerNorm) {
  check_case("layer_norm_last", {"x", "w", "b"},
             [](auto& v) { return layer_norm(v[0], {4}, v[1], v[2], 1e-5f); });
  check_case("layer_norm_last2", {"x", "w", "b"},
             [](auto& v) { return layer_norm(v[0], {3, 4}, v[1], v[2], 1e-5f); });
}

TEST(OpsReference, AddLayerNorm) {  // both outputs, stacked: (2, ...)
  check_case("add_layer_norm", {"a", "b", "w", "bias"}, [](auto& v) {
    const auto [s, n] = add_layer_norm(v[0], v[1], {6}, v[2], v[3]);
    return stack({s, n});
  });
}

TEST(OpsReference, CrossEntropyIgnoreIndex) {
  const auto t = idx("ce_ignore_mean");
  check_case("ce_ignore_mean", {"x"}, [&](auto& v) { return cross_entropy(v[0], t); });
}

TEST(OpsReference, CrossEntropyLabelSmoothing) {
  const auto t = idx("ce_ignore3_smooth_mean");
  check_case("ce_ignore3_smooth_mean", {"x"}, [&](auto& v) {
    return cross_entropy(v[0], t,
                         CrossEntropyOptions().ignore_index(3).label_smoothing(0.2f));
  });
  const auto t2 = idx("ce_ignore_smooth_sum");
  check_case("ce_ignore_smooth_sum", {"x"}, [&](auto& v) {
    return cross_entropy(
        v[0], t2, CrossEntropyOptions().reduction(Reduction::Sum).label_smoothing(0.1f));
  });
}

// Regression: log-probabilities were computed as x - (m + log z), which loses 3e-5 at |x| = 1000.
TEST(OpsReference, CrossEntropyLargeLogits) {
  const auto t = idx("ce_big_none");
  check_case("ce_big_none", {"x"}, [&](auto& v) {
    return cross_entropy(
        v[0], t, CrossEntropyOptions().reduction(Reduction::None).label_smoothing(0.1f));
  });
}

TEST(OpsReference, CrossEntropySpatial) {
  const auto t = idx("ce_nkd_none");
  check_case("ce_nkd_none", {"x"}, [&](auto& v) {
    return cross_entropy(v[0], t, CrossEntropyOptions().reduction(Reduction::None));
  });
  const auto t2 = idx("ce_nkd_smooth_mean");
  check_case("ce_nkd_smooth_mean", {"x"}, [&](auto& v) {
    return cross_entropy(v[0], t2, CrossEntropyOptions().label_smoothing(0.3f));
  });
}

TEST(OpsReference, MatmulBatchedBroadcastAnd1D) {
  for (const char* name :
       {"matmul_bcast4d", "matmul_2d", "matmul_3d_2d", "matmul_2d_3d", "matmul_1d_1d",
        "matmul_1d_2d", "matmul_2d_1d", "matmul_1d_3d", "matmul_4d_1d"})
    check_case(name, {"a", "b"}, [](auto& v) { return matmul(v[0], v[1]); });
}

TEST(OpsReference, GatherWithRepeatedIndices) {
  const auto i = idx("index_select_rows", "i");
  check_case("index_select_rows", {"w"}, [&](auto& v) { return index_select(v[0], 0, i); });
  const auto i1 = idx("index_select_axis1", "i");
  check_case("index_select_axis1", {"w"}, [&](auto& v) { return index_select(v[0], 1, i1); });
  const auto ids = idx("embedding", "i");
  check_case("embedding", {"w"}, [&](auto& v) { return embedding(v[0], ids); });
  const auto ids2 = idx("embedding_pad", "i");
  check_case("embedding_pad", {"w"}, [&](auto& v) { return embedding(v[0], ids2, 4); });
}

TEST(OpsReference, BroadcastArithmetic) {
  check_case("bcast_add", {"a", "b"}, [](auto& v) { return v[0] + v[1]; });
  check_case("bcast_sub", {"a", "b"}, [](auto& v) { return v[0] - v[1]; });
  check_case("bcast_mul", {"a", "b"}, [](auto& v) { return v[0] * v[1]; });
  check_case("bcast_div", {"a", "b"}, [](auto& v) { return v[0] / v[1]; });
  check_case("bcast_div_rev", {"a", "b"}, [](auto& v) { return v[1] / v[0]; });
  check_case("bcast_mul_col_row", {"a", "b"}, [](auto& v) { return v[0] * v[1]; });
  check_case("bcast_sub_0d", {"a", "b"}, [](auto& v) { return v[0] - v[1]; });
}

// Closures reuse the output gradient's buffer for an input's gradient (BackwardContext::
// take_grad): the caller's upstream gradient and a retained gradient must not change.
TEST(OpsReference, InPlaceGradientsLeaveUpstreamAndRetainedGradsAlone) {
  const Tensor a = ref::load(file("bcast_mul", "a"), true);
  const Tensor b = ref::load(file("bcast_mul", "b"), true);
  const Tensor g = ref::load(file("bcast_mul", "g"));
  Tensor y = a * b;
  y.retain_grad();
  Tensor z = tanh(neg(y * 2.0f + 1.0f));  // every op here computes its gradient in place
  Tensor upstream = g.clone();
  z.backward(upstream);
  EXPECT_TRUE(ref::close(upstream, g, 0, 0)) << "the upstream gradient was modified";
  // dz/dy = -2 (1 - z²), so y.grad = -2 g (1 - z²), and a.grad = Σ_bcast y.grad · b.
  const auto zv = z.to_vector(), gv = g.to_vector();
  std::vector<float> dy(zv.size());
  for (size_t i = 0; i < zv.size(); ++i) dy[i] = -2.0f * gv[i] * (1.0f - zv[i] * zv[i]);
  EXPECT_TRUE(ref::close(y.grad(), tensor(dy, y.shape())));
  Tensor a2 = ref::load(file("bcast_mul", "a"), true);
  mul(a2, b.detach()).backward(tensor(dy, y.shape()));
  EXPECT_TRUE(ref::close(a.grad(), a2.grad()));
}
