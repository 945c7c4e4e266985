// linear_basics: the Linear layer of our notes, made tangible in four parts.
//
//   1. The weight layout: Linear(in, out) stores W as (out, in); row j holds the weights of
//      output j, so y_j = Σ_i W[j, i] x_i + b_j, i.e. y = x Wᵀ + b.
//   2. Regression: data made from a known W and b; gradient descent on the mean squared
//      error recovers them.
//   3. Two Linears with nothing in between are one Linear: W = W2 W1, b = W2 b1 + b2, and
//      the product's rank is at most the narrow middle width.
//   4. A nonlinear 2-D problem (two concentric rings, or XOR) that no single Linear can
//      separate, solved by an MLP with Xavier init; both accuracies are printed. The MLP's
//      checkpoint is saved, reloaded and checked, with its training curve beside it.
//
// Legend: N = points, in/out = Linear sizes, H = MLP hidden width.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/points.h"
#include "common/progress.h"
#include "common/run_log.h"
#include "tapegrad/tapegrad.h"

namespace nn = tg::nn;
using ex::Points;

namespace {

void print_matrix(const char* name, const tg::Tensor& m) {
  std::printf("  %s %s =\n", name, tg::to_string(m.shape()).c_str());
  const int64_t rows = m.dim() == 2 ? m.size(0) : 1, cols = m.size(-1);
  for (int64_t r = 0; r < rows; ++r) {
    std::printf("    [");
    for (int64_t c = 0; c < cols; ++c) std::printf(" %8.4f", m.data_ptr()[r * cols + c]);
    std::printf(" ]\n");
  }
}

float max_abs_diff(const tg::Tensor& a, const tg::Tensor& b) {
  float d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) d = std::max(d, std::fabs(a.data_ptr()[i] - b.data_ptr()[i]));
  return d;
}

// ---- 1. the weight layout -----------------------------------------------------------------------

void part_layout() {
  std::printf("== 1. Linear(3, 2): weight (out, in) = (2, 3), bias (2); y = x Wᵀ + b\n");
  nn::Linear lin(3, 2);
  lin.weight.data().assign({0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
  lin.bias.data().assign({0.1f, 0.2f});
  const tg::Tensor x = tg::tensor({1.0f, 2.0f, 3.0f});
  const tg::Tensor y = lin.forward(x);
  print_matrix("W", lin.weight);
  print_matrix("b", lin.bias);
  print_matrix("x", x);
  const float* w = lin.weight.data_ptr();
  for (int j = 0; j < 2; ++j)
    std::printf("  y[%d] = row %d of W · x + b[%d] = %.1f·1 + %.1f·2 + %.1f·3 + %.1f = %.1f\n", j, j,
                j, w[3 * j], w[3 * j + 1], w[3 * j + 2], lin.bias.data_ptr()[j], y.data_ptr()[j]);
  std::printf("  Linear(3, 2)(x) = [%.1f, %.1f]   (expected [1.5, 3.4])\n", y.data_ptr()[0], y.data_ptr()[1]);
  const tg::Tensor batch = tg::tensor({{1, 2, 3}, {0, 0, 0}, {1, 0, 0}});
  std::printf("  a batch (3, 3) -> %s: each row of x is one input; x = 0 gives b, x = e0 gives column 0 of W + b\n",
              tg::to_string(lin.forward(batch).shape()).c_str());
  print_matrix("Linear(batch)", lin.forward(batch));
}

// ---- 2. recovering a known W and b --------------------------------------------------------------

bool part_regression(int64_t steps) {
  std::printf("\n== 2. Regression: y = x W_trueᵀ + b_true + noise, N = 256; SGD lr 0.1 on the MSE\n");
  const tg::Tensor w_true = tg::tensor({{0.1f, 0.2f, 0.3f}, {0.4f, 0.5f, 0.6f}});
  const tg::Tensor b_true = tg::tensor({0.1f, 0.2f});
  const tg::Tensor x = tg::randn({256, 3});
  const tg::Tensor y = tg::linear(x, w_true, b_true) + tg::randn({256, 2}) * 0.01f;

  auto lin = std::make_shared<nn::Linear>(3, 2);  // Xavier-uniform weight, zero bias
  tg::optim::SGD opt(lin->parameters(), tg::optim::SGDOptions(0.1));
  for (int64_t step = 0; step <= steps; ++step) {
    const tg::Tensor loss = tg::mse_loss(lin->forward(x), y);
    if (step % std::max<int64_t>(steps / 4, 1) == 0 || step == steps)
      std::printf("  step %4lld  loss %.6f\n", static_cast<long long>(step), loss.item());
    if (step == steps) break;
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  std::printf("          recovered                 true\n");
  for (int r = 0; r < 2; ++r) {
    std::printf("  W[%d]  ", r);
    for (int c = 0; c < 3; ++c) std::printf("%7.4f ", lin->weight.data()(r, c));
    std::printf("   ");
    for (int c = 0; c < 3; ++c) std::printf("%7.4f ", w_true.data()(r, c));
    std::printf("\n");
  }
  std::printf("  b     %7.4f %7.4f           %7.4f %7.4f\n", lin->bias.data()[0], lin->bias.data()[1],
              b_true.data()[0], b_true.data()[1]);
  const float err = std::max(max_abs_diff(lin->weight, w_true), max_abs_diff(lin->bias, b_true));
  const bool ok = err < 0.01f;
  std::printf("  largest error %.4f: %s\n", err, ok ? "recovered W and b within 0.01" : "NOT recovered");
  return ok;
}

// ---- 3. two Linears collapse to one -------------------------------------------------------------

/// Numerical rank by Gaussian elimination with partial pivoting (pivots below tol count as 0).
int rank_of(const tg::Tensor& m, double tol = 1e-5) {
  const int64_t rows = m.size(0), cols = m.size(1);
  std::vector<double> a(m.data_ptr(), m.data_ptr() + m.numel());
  int rank = 0;
  for (int64_t c = 0; c < cols && rank < rows; ++c) {
    int64_t best = rank;
    for (int64_t r = rank; r < rows; ++r)
      if (std::fabs(a[r * cols + c]) > std::fabs(a[best * cols + c])) best = r;
    if (std::fabs(a[best * cols + c]) < tol) continue;
    for (int64_t k = 0; k < cols; ++k) std::swap(a[rank * cols + k], a[best * cols + k]);
    for (int64_t r = rank + 1; r < rows; ++r) {
      const double f = a[r * cols + c] / a[rank * cols + c];
      for (int64_t k = c; k < cols; ++k) a[r * cols + k] -= f * a[rank * cols + k];
    }
    ++rank;
  }
  return rank;
}

void part_collapse() {
  std::printf("\n== 3. Linear(4, 2) then Linear(2, 4), no activation: one Linear(4, 4) of rank <= 2\n");
  nn::Linear l1(4, 2), l2(2, 4);
  nn::init::uniform_(l1.bias, -0.5f, 0.5f);  // nonzero biases, so b matters too
  nn::init::uniform_(l2.bias, -0.5f, 0.5f);
  tg::NoGradGuard no_grad;
  const tg::Tensor W = tg::matmul(l2.weight, l1.weight);                    // (4, 2)(2, 4) -> (4, 4)
  const tg::Tensor b = tg::matmul(l2.weight, l1.bias) + l2.bias;            // (4)
  print_matrix("W = W2 W1", W);
  print_matrix("b = W2 b1 + b2", b);
  const tg::Tensor x = tg::randn({64, 4});
  const tg::Tensor two = l2.forward(l1.forward(x));
  const tg::Tensor one = tg::linear(x, W, b);
  std::printf("  64 random inputs: max |l2(l1(x)) - (x Wᵀ + b)| = %.2e\n", max_abs_diff(two, one));
  std::printf("  rank(W) = %d (a 4 x 4 matrix, but every input passes through 2 numbers), "
              "rank(W1) = %d, rank(W2) = %d\n",
              rank_of(W), rank_of(l1.weight), rank_of(l2.weight));
  nn::Linear full(4, 4);
  std::printf("  a Linear(4, 4) drawn at random has rank %d: stacking without a nonlinearity adds "
              "parameters, never expressiveness\n", rank_of(full.weight));
}

// ---- 4. a nonlinear problem ---------------------------------------------------------------------

/// Two concentric rings (class 0 inside r < 0.5, class 1 for 0.7 < r < 1) or XOR quadrants.
Points make_points(const std::string& problem, int64_t n) {
  std::vector<float> xs;
  std::vector<int64_t> ys;
  tg::Generator& g = tg::default_generator();
  for (int64_t i = 0; i < n; ++i) {
    float a, b;
    int64_t label;
    if (problem == "circles") {
      label = i % 2;
      const float r = label == 0 ? g.uniform(0.0f, 0.5f) : g.uniform(0.7f, 1.0f);
      const float t = g.uniform(0.0f, 6.2831853f);
      a = r * std::cos(t);
      b = r * std::sin(t);
    } else {  // xor: the sign of a·b, kept away from the axes
      a = g.uniform(-1.0f, 1.0f);
      b = g.uniform(-1.0f, 1.0f);
      a += a < 0 ? -0.1f : 0.1f;
      b += b < 0 ? -0.1f : 0.1f;
      label = (a > 0) != (b > 0);
    }
    xs.push_back(a);
    xs.push_back(b);
    ys.push_back(label);
  }
  return {tg::tensor(xs, {n, 2}), tg::Indices(ys, {n})};
}

double accuracy(nn::UnaryModule& model, const Points& p) {
  tg::NoGradGuard no_grad;
  const tg::Indices pred(model.forward(p.x).argmax(1));
  int64_t correct = 0;
  for (int64_t i = 0; i < p.y.numel(); ++i) correct += pred.values[i] == p.y.values[i];
  return static_cast<double>(correct) / static_cast<double>(p.y.numel());
}

/// Full-batch Adam on the cross-entropy; logs step, loss, lr, accuracy to `csv` if given.
void fit(nn::UnaryModule& model, tg::optim::Adam& opt, const Points& train, int64_t steps,
         const std::string& label, ex::CsvLog* csv) {
  ex::ProgressBar bar(label, steps);
  double loss_value = 0;
  for (int64_t step = 1; step <= steps; ++step) {
    const tg::Tensor logits = model.forward(train.x);  // (N, 2)
    const tg::Tensor loss = tg::cross_entropy(logits, train.y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    loss_value = loss.item();
    if (csv && (step % 10 == 0 || step == 1))
      csv->add(step, loss_value, opt.param_groups()[0].lr(), accuracy(model, train));
    char status[64];
    std::snprintf(status, sizeof status, "loss %.4f", loss_value);
    bar.update(step, status);
  }
  char summary[96];
  std::snprintf(summary, sizeof summary, "loss %.4f  train acc %5.1f%%", loss_value, 100 * accuracy(model, train));
  bar.finish(summary);
}

/// The predicted class over [-1.2, 1.2]² as characters: '.' class 0, '#' class 1.
std::vector<std::string> decision_map(nn::UnaryModule& model, int width, int height) {
  tg::NoGradGuard no_grad;
  std::vector<float> grid;
  for (int r = 0; r < height; ++r)
    for (int c = 0; c < width; ++c) {
      grid.push_back(-1.2f + 2.4f * (c + 0.5f) / width);
      grid.push_back(1.2f - 2.4f * (r + 0.5f) / height);
    }
  const tg::Indices pred(
      model.forward(tg::tensor(grid, {int64_t(width) * height, 2})).argmax(1));
  std::vector<std::string> rows(height, std::string(width, ' '));
  for (int r = 0; r < height; ++r)
    for (int c = 0; c < width; ++c) rows[r][c] = pred.values[r * width + c] ? '#' : '.';
  return rows;
}

std::shared_ptr<nn::Sequential> make_mlp(int64_t hidden) {
  auto mlp = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(2, hidden), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(hidden, hidden), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(hidden, 2));
  return mlp;
}

struct Problem {
  Points train, test;
  std::string source;
};

/// --data's points (every 5th held out), or generated ones.
Problem load_problem(const std::string& data, const std::string& problem) {
  Problem p;
  if (data.empty()) {
    p.train = make_points(problem, 400);
    p.test = make_points(problem, 400);
    p.source = problem + " (generated)";
    return p;
  }
  const Points all = ex::read_points(data);
  std::vector<int64_t> tr, te;
  for (int64_t i = 0; i < all.y.numel(); ++i) (i % 5 == 4 ? te : tr).push_back(i);
  auto pick = [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> labels;
    for (int64_t i : idx) labels.push_back(all.y.values[i]);
    const auto n = static_cast<int64_t>(idx.size());
    return Points{tg::index_select(all.x, 0, tg::Indices(idx, {n})), tg::Indices(labels, {n})};
  };
  p.train = pick(tr);
  p.test = pick(te);
  p.source = data;
  return p;
}

void part_nonlinear(const ex::RunOptions& run, const Problem& problem, int64_t steps, int64_t hidden) {
  const Points& train = problem.train;
  const Points& test = problem.test;
  const std::string& source = problem.source;
  std::printf("\n== 4. A nonlinear 2-D problem: %s, %lld train / %lld test points\n", source.c_str(),
              static_cast<long long>(train.y.numel()), static_cast<long long>(test.y.numel()));

  nn::Linear single(2, 2);  // logistic regression: a straight decision boundary
  tg::optim::Adam opt1(single.parameters(), tg::optim::AdamOptions(run.lr));
  fit(single, opt1, train, steps, "  single Linear(2, 2)     ", nullptr);

  auto mlp = make_mlp(hidden);
  // Xavier init with the tanh gain (nn::Linear's default is Xavier with gain 1).
  for (const auto& [name, p] : mlp->named_parameters())
    if (name.find("weight") != std::string::npos)
      nn::init::xavier_uniform_(p, nn::init::calculate_gain(name.rfind("4.", 0) == 0 ? "linear" : "tanh"));
  std::string tree = mlp->repr();
  for (size_t at = tree.find('\n'); at != std::string::npos; at = tree.find('\n', at + 5))
    tree.replace(at, 1, "\n    ");
  std::printf("  MLP, Xavier-uniform weights (tanh gain 5/3 before each tanh), zero biases:\n    %s\n",
              tree.c_str());
  tg::optim::Adam opt2(mlp->parameters(), tg::optim::AdamOptions(run.lr));
  const std::string csv_path = ex::sibling_path(run.checkpoint, ".csv");
  ex::CsvLog csv(csv_path);
  char label[64];
  std::snprintf(label, sizeof label, "  MLP 2-%lld-%lld-2 (tanh)   ", static_cast<long long>(hidden),
                static_cast<long long>(hidden));
  fit(*mlp, opt2, train, steps, label, &csv);

  const double acc_single = accuracy(single, test), acc_mlp = accuracy(*mlp, test);
  std::printf("  test accuracy: single Linear %.1f%%, MLP %.1f%%\n", 100 * acc_single, 100 * acc_mlp);
  std::printf("  decision regions on [-1.2, 1.2]² ('#' class 1):\n");
  const auto map1 = decision_map(single, 36, 15), map2 = decision_map(*mlp, 36, 15);
  std::printf("    %-36s    %s\n", "single Linear", "MLP");
  for (size_t r = 0; r < map1.size(); ++r) std::printf("    %s    %s\n", map1[r].c_str(), map2[r].c_str());

  // Save the MLP, reload it into a fresh one and check it predicts the same.
  tg::Checkpoint ck;
  ck.set_model(*mlp);
  ck.set("optimizer", opt2.state_dict());
  ck.step = steps;
  ck.metadata = {{"example", "linear_basics"}, {"hidden", std::to_string(hidden)}, {"problem", source}};
  ex::make_parent_dirs(run.checkpoint);
  ck.save(run.checkpoint);
  auto fresh = make_mlp(hidden);
  tg::Checkpoint::load(run.checkpoint).restore_model(*fresh);
  tg::NoGradGuard no_grad;
  const float diff = max_abs_diff(mlp->forward(test.x), fresh->forward(test.x));
  const double acc_fresh = accuracy(*fresh, test);
  std::printf("  checkpoint %s reloaded: test accuracy %.1f%%, max output difference %g (%s)\n",
              run.checkpoint.c_str(), 100 * acc_fresh, diff, diff == 0 ? "identical" : "DIFFERENT");
  if (diff != 0) throw tg::CheckpointError("the reloaded MLP predicts differently");
  ex::plot_loss_curve(csv_path, ex::sibling_path(run.checkpoint, ".png"),
                      "linear_basics: MLP on " + source);
  std::printf("  training curve: %s\n", csv_path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  ex::RunOptions run;
  run.lr = 0.01;
  run.checkpoint = "checkpoints/linear_basics.ckpt";
  int64_t steps = 600, hidden = 16;
  std::string problem = "circles";

  CLI::App app{"The Linear layer: weight layout, regression, collapse of stacked Linears, and an "
               "MLP on a nonlinear 2-D problem."};
  app.add_option("--steps", steps, "training steps of part 4 (the single Linear and the MLP)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--hidden", hidden, "MLP hidden width")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--problem", problem, "part 4's generated data")
      ->capture_default_str()
      ->check(CLI::IsMember({"circles", "xor"}));
  ex::add_run_options(app, run, "CSV of 2-D points 'x,y,label' for part 4 (default: generate --problem)");
  return ex::run_main(app, argc, argv, [&] {
    ex::apply_run_options(run);
    const Problem points = load_problem(run.data, problem);  // a bad --data fails here, first
    part_layout();
    const bool recovered = part_regression(200);
    part_collapse();
    part_nonlinear(run, points, steps, hidden);
    return recovered ? 0 : 2;
  });
}
