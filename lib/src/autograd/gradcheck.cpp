// tg::gradcheck: the tape's gradients against central finite differences, through a random
// projection of the output.
#include <cmath>
#include <sstream>

#include "tapegrad/autograd.h"
#include "tapegrad/random.h"

namespace tg {

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  GradcheckResult result;
  std::ostringstream report;
  int mismatches = 0;

  // Keep the caller's gradients; the check starts from none.
  std::vector<Tensor> old_grads;
  for (const auto& x : inputs) {
    old_grads.push_back(x.grad());
    x.set_grad(Tensor());
  }

  Tensor out = fn(inputs);
  Generator gen(opt.seed());
  std::vector<float> r(static_cast<size_t>(out.numel()));
  for (auto& v : r) v = gen.uniform(-1.0f, 1.0f);
  const Tensor projection = tensor(r, out.shape());
  if (out.requires_grad()) out.backward(projection);

  auto project = [&]() {
    NoGradGuard no_grad;
    const std::vector<float> py = fn(inputs).to_vector();  // the output may be a view
    double acc = 0;
    for (size_t i = 0; i < r.size(); ++i) acc += static_cast<double>(r[i]) * py[i];
    return acc;
  };

  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    const Tensor g = x.grad();
    float* px = x.data_ptr();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float orig = px[i];
      px[i] = orig + static_cast<float>(opt.eps());
      const double plus = project();
      px[i] = orig - static_cast<float>(opt.eps());
      const double minus = project();
      px[i] = orig;
      const double numeric = (plus - minus) / (2 * opt.eps());
      const double analytic = g.defined() ? g.data_ptr()[i] : 0.0;
      const double err = std::abs(numeric - analytic);
      result.max_abs_error = std::max(result.max_abs_error, err);
      if (!(err <= opt.atol() + opt.rtol() * std::abs(numeric))) {
        result.ok = false;
        if (++mismatches <= 5)
          report << "input " << k << " " << to_string(x.shape()) << " element " << i
                 << ": numeric " << numeric << " vs analytic " << analytic << "\n";
      }
    }
  }
  if (mismatches > 5) report << "... " << mismatches - 5 << " more mismatches\n";
  result.message = report.str();

  for (size_t k = 0; k < inputs.size(); ++k) inputs[k].set_grad(old_grads[k]);
  return result;
}

}  // namespace tg
