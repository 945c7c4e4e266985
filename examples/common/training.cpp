#include <cmath>
#include "common/training.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <sstream>

#include "common/progress.h"
#include "tapegrad/autograd.h"
#include "tapegrad/error.h"
#include "tapegrad/nn/init.h"
#include "tapegrad/optim/clip.h"

namespace ex {

void LossLog::add(double loss) {
  window += loss;
  eval_sum += loss;
  ++window_n;
  ++eval_n;
}

double LossLog::take_window() {
  const double mean = window / static_cast<double>(window_n);
  window = 0;
  window_n = 0;
  return mean;
}

void LossLog::end_eval_window() {
  eval_sum = 0;
  eval_n = 0;
}

tg::StateDict LossLog::state_dict() const {
  tg::StateDict d;
  d.numbers = {{"window", window}, {"window_n", static_cast<double>(window_n)}, {"eval_sum", eval_sum},
               {"eval_n", static_cast<double>(eval_n)}, {"lr", lr}};
  return d;
}

void LossLog::load_state_dict(const tg::StateDict& d) {
  window = d.number_at("window", "log");
  window_n = static_cast<int64_t>(d.number_at("window_n", "log"));
  eval_sum = d.number_at("eval_sum", "log");
  eval_n = static_cast<int64_t>(d.number_at("eval_n", "log"));
  lr = d.number_at("lr", "log");
}

tg::Checkpoint snapshot(const tg::nn::Module& model,
                        std::initializer_list<std::pair<std::string, tg::StatefulRef>> parts, int64_t step) {
  tg::Checkpoint ck;  // captures the global generator now
  ck.set_model(model);
  for (const auto& [name, part] : parts) ck.set(name, part.state_dict());
  ck.step = step;
  return ck;
}

void check_same_schedule(const tg::Checkpoint& ck, const std::string& path, int64_t steps, double lr) {
  const tg::StateDict& s = ck.get("scheduler");
  const double saved_steps = s.number_at("total_steps", path + ": scheduler");
  const double saved_lr = s.number_at("base_lrs.0", path + ": scheduler");
  auto text = [](double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  };
  if (saved_steps != static_cast<double>(steps) || saved_lr != lr)
    throw tg::ValueError("--resume: " + path + " was started with --steps " + text(saved_steps) + " --lr " +
                         text(saved_lr) + ", this run has --steps " + std::to_string(steps) + " --lr " + text(lr) +
                         "; resume with the same options");
}

ExampleMetadata::ExampleMetadata(std::map<std::string, std::string> metadata, std::string path,
                                 std::string example)
    : metadata_(std::move(metadata)), path_(std::move(path)), example_(std::move(example)) {
  if (at("example") != example_)
    throw tg::CheckpointError(path_ + " is a " + at("example") + " checkpoint, not a " + example_ + " one");
}

const std::string& ExampleMetadata::at(const std::string& key) const {
  const auto it = metadata_.find(key);
  if (it == metadata_.end())
    throw tg::CheckpointError(path_ + ": metadata has no '" + key + "' (not a " + example_ + " checkpoint?)");
  return it->second;
}

void init_gpt2_(tg::nn::Module& model) {
  for (const auto& [name, p] : model.named_parameters()) {
    if (name.find("ln") != std::string::npos) continue;
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0)
      tg::nn::init::zeros_(p);
    else
      tg::nn::init::normal_(p, 0.0f, 0.02f);
  }
}

void check_loss(double loss, int64_t step, double lr) {
  if (std::isfinite(loss)) return;
  char buf[160];
  std::snprintf(buf, sizeof buf, "training diverged at step %lld: the loss is %s (lr %g); try a smaller --lr",
                static_cast<long long>(step), std::isnan(loss) ? "nan" : "inf", lr);
  throw tg::ValueError(buf);
}

bool StepLoop::run(int64_t& step) const {
  const StepOptions& o = options;
  while (step < o.steps) {
    const int64_t first = step + 1, stop = std::min(o.steps, (step / o.eval_every + 1) * o.eval_every);
    ProgressBar bar("steps " + std::to_string(first) + "-" + std::to_string(stop), stop - step);
    while (step < stop) {
      const tg::Tensor l = loss();
      opt.zero_grad();
      l.backward();
      if (sync_gradients) sync_gradients();
      tg::nn::utils::clip_grad_norm_(params, 1.0);
      log.lr = opt.param_groups()[0].lr();
      check_loss(l.item(), step + 1, log.lr);
      opt.step();
      sched.step();
      ++step;
      log.add(l.item());
      if (step % o.log_every == 0 && step != stop) {
        const double window = log.take_window();
        if (csv) csv->add(step, window, log.lr, std::numeric_limits<double>::quiet_NaN());
      }
      if (step == o.stop_after) {
        save(step);
        bar.finish("stopped at step " + std::to_string(step) + " (--stop-after); checkpoint saved");
        return false;
      }
      char status[64];
      std::snprintf(status, sizeof status, "%s %.4f", loss_label.c_str(), log.since_eval());
      bar.update(step - first + 1, status);
    }
    const WindowEnd end = end_window(log.since_eval());
    if (log.window_n > 0) {
      const double window = log.take_window();
      if (csv) csv->add(step, window, log.lr, end.accuracy);
    }
    log.end_eval_window();
    bar.finish(end.summary);
    save(step);
  }
  return true;
}

}  // namespace ex
