// Writing a new module (the README's "Writing a new module" guide, compiled): a gated linear
// unit with a Linear submodule and raw parameters, its gradient check, a few training steps,
// and a save/load round trip.
//
//   x (B, in) -> GLU -> (B, out) -> LayerNorm -> Linear -> (B, 1)
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "tapegrad/tapegrad.h"

// ---- the module (the code shown in the README) ----------------------------------------------
/// Gated linear unit: y = value(x) · σ(x W_gᵀ + b_g).   (..., in) -> (..., out)
class GLU : public tg::nn::UnaryModule {
 public:
  GLU(int64_t in, int64_t out) : UnaryModule("GLU"), in_(in), out_(out) {
    value = register_module("value", std::make_shared<tg::nn::Linear>(in, out));
    gate_weight = register_parameter("gate_weight", tg::zeros({out, in}));
    gate_bias = register_parameter("gate_bias", tg::zeros({out}));
    reset_parameters();
  }
  void reset_parameters() {
    tg::nn::init::xavier_uniform_(gate_weight, tg::nn::init::calculate_gain("sigmoid"));
    tg::nn::init::constant_(gate_bias, 1.0f);  // gates start mostly open
  }
  tg::Tensor forward(const tg::Tensor& x) override {
    auto scope = this->scope();  // names this module in anomaly reports
    if (x.dim() == 0 || x.size(-1) != in_)
      shape_error("input shape " + tg::to_string(x.shape()) + ", expected last dim " + std::to_string(in_));
    return value(x) * tg::sigmoid(tg::linear(x, gate_weight, gate_bias));
  }
  std::string signature() const override { return std::to_string(in_) + "→" + std::to_string(out_); }

  tg::nn::ModuleHolder<tg::nn::Linear> value;  // a shared_ptr you can call: value(x)
  tg::Tensor gate_weight, gate_bias;           // (out, in), (out)

 private:
  int64_t in_, out_;
};
// ---------------------------------------------------------------------------------------------

std::shared_ptr<tg::nn::Sequential> make_model() {
  return std::make_shared<tg::nn::Sequential>(std::make_shared<GLU>(4, 16),
                                              std::make_shared<tg::nn::LayerNorm>(16),
                                              std::make_shared<tg::nn::Linear>(16, 1));
}

int run(const std::string& path) {
  tg::set_device(tg::Device::CPU);  // tiny products: no GPU wanted
  tg::manual_seed(0);
  auto model = make_model();
  std::cout << *model << "\n\n";
  for (const auto& [name, p] : model->named_parameters())
    std::printf("  %-16s %s\n", name.c_str(), tg::to_string(p.shape()).c_str());

  // 1. Gradient check of the new module: the input and every parameter, against central
  //    finite differences.
  auto glu = model->at<GLU>(0);
  const tg::Tensor xc = tg::randn({3, 4}, /*requires_grad=*/true);
  std::vector<tg::Tensor> inputs = {xc};
  for (const auto& p : glu->parameters()) inputs.push_back(p);
  const auto check = tg::gradcheck([&](const std::vector<tg::Tensor>&) { return glu->forward(xc); }, inputs);
  std::printf("\ngradcheck of GLU: %s (max |numeric - analytic| = %.2e)\n",
              check.ok ? "ok" : "FAILED", check.max_abs_error);
  if (!check.ok) {
    std::printf("%s", check.message.c_str());
    return 1;
  }

  // 2. Errors name the module's path.
  try {
    model->forward(tg::zeros({2, 5}));
  } catch (const tg::ShapeError& e) {
    std::printf("a wrong input gives: %s\n\n", e.what());
  }

  // 3. A few steps of plain SGD on y = x0·x1 + sin(x2) - x3 (batch 128).
  const tg::Tensor x = tg::randn({128, 4});
  std::vector<float> target(128);
  for (int i = 0; i < 128; ++i) {
    const auto r = x.data();
    target[static_cast<size_t>(i)] = r(i, 0) * r(i, 1) + std::sin(r(i, 2)) - r(i, 3);
  }
  const tg::Tensor y = tg::tensor(target, {128, 1});
  const float lr = 0.05f;
  float first = 0, last = 0;
  for (int step = 0; step <= 200; ++step) {
    const tg::Tensor loss = tg::mse_loss(model->forward(x), y);
    model->zero_grad();
    loss.backward();
    {
      tg::NoGradGuard no_grad;
      for (const auto& p : model->parameters()) {
        float* w = p.data_ptr();
        const float* g = p.grad().data_ptr();
        for (int64_t i = 0; i < p.numel(); ++i) w[i] -= lr * g[i];
      }
    }
    if (step == 0) first = loss.item();
    last = loss.item();
    if (step % 50 == 0) std::printf("step %3d  loss %.5f\n", step, loss.item());
  }
  std::printf("loss %.5f -> %.5f\n", first, last);
  if (!(last < first)) return 1;

  // 4. Save the trained weights, load them into a fresh model, and get the same outputs.
  const auto folder = std::filesystem::path(path).parent_path();
  if (!folder.empty()) std::filesystem::create_directories(folder);
  tg::save(*model, path);
  auto fresh = make_model();
  tg::load(*fresh, path);
  const auto a = model->forward(x).to_vector(), b = fresh->forward(x).to_vector();
  if (a != b) {
    std::printf("reloaded model differs from the saved one\n");
    return 1;
  }
  std::printf("saved to %s and reloaded: identical outputs\n", path.c_str());
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc > 1 ? argv[1] : "checkpoints/custom_module.ckpt");
  } catch (const std::exception& e) {  // tg::Error, or a filesystem error
    std::fprintf(stderr, "custom_module: error: %s\n", e.what());
    return 1;
  }
}
