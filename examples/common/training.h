#pragma once
// The training-run pieces the examples share: checkpoints of a whole run, the loss sums a
// resumed run needs, the --resume checks, and the step loop of transformer_lm and
// transformer_sort.
//
//   ex::LossLog log;
//   if (resume) {
//     ex::check_same_schedule(ck, path, steps, lr);
//     ck.restore(*model, {{"optimizer", opt}, {"scheduler", sched}, {"log", log}});
//   }
//   ex::snapshot(*model, {{"optimizer", opt}, {"scheduler", sched}, {"log", log}}, step).save(path);
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/run_log.h"
#include "tapegrad/checkpoint.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/optim/lr_scheduler.h"
#include "tapegrad/optim/optimizer.h"
#include "tapegrad/state_dict.h"
#include "tapegrad/tensor.h"

namespace ex {

/// Running sums of the training loss: since the last CSV row (the window) and since the last
/// evaluation. Saved in the checkpoint, so a resumed run writes the same rows.
struct LossLog {
  double window = 0, eval_sum = 0, lr = 0;
  int64_t window_n = 0, eval_n = 0;

  void add(double loss);
  /// The window's mean loss, and a new window.
  double take_window();
  double since_eval() const { return eval_sum / static_cast<double>(eval_n); }
  void end_eval_window();
  /// numbers "window", "window_n", "eval_sum", "eval_n", "lr".
  tg::StateDict state_dict() const;
  void load_state_dict(const tg::StateDict& d);
};

/// A checkpoint of a run at `step`: the model, each part's state_dict() under its name, and
/// the global generator as it is now. The mirror of tg::Checkpoint::restore(model, parts).
tg::Checkpoint snapshot(const tg::nn::Module& model,
                        std::initializer_list<std::pair<std::string, tg::StatefulRef>> parts, int64_t step);

/// --resume continues the same run: the schedule in the checkpoint must be this run's
/// (--steps and --lr), else tg::ValueError saying what differs.
void check_same_schedule(const tg::Checkpoint& ck, const std::string& path, int64_t steps, double lr);

/// tg::ValueError("training diverged at step N: the loss is nan ...") unless `loss` is finite:
/// a run that blew up says so where it did, not later as a mismatch somewhere else.
void check_loss(double loss, int64_t step, double lr);

/// The metadata an example wrote into its checkpoint. The constructor checks that "example"
/// is `example`; at() names the file and the key it misses. Both throw tg::CheckpointError.
class ExampleMetadata {
 public:
  ExampleMetadata(std::map<std::string, std::string> metadata, std::string path, std::string example);
  const std::string& at(const std::string& key) const;

 private:
  std::map<std::string, std::string> metadata_;
  std::string path_, example_;
};

/// GPT-2's initialisation: weights N(0, 0.02), biases zero; LayerNorms (parameters whose
/// name holds "ln") keep 1 and 0.
void init_gpt2_(tg::nn::Module& model);

/// How a step-counted run proceeds: `steps` optimizer steps in all, an evaluation and a
/// checkpoint every `eval_every` steps, a CSV row every `log_every`.
struct StepOptions {
  int64_t steps = 1000;
  int64_t eval_every = 250;
  int64_t log_every = 25;
  int64_t stop_after = 0;  // > 0: stop after this step and save, as if interrupted
};

/// The step loop of transformer_lm and transformer_sort. Steps run in windows that end at
/// multiples of eval_every (so a resumed run keeps them), each under a progress bar. A step:
/// loss(), zero_grad, backward, sync_gradients (if set), clip the gradient norm of `params` to
/// 1, opt.step, sched.step; the loss goes into `log`, a CSV row (loss, lr, no accuracy) every
/// log_every steps except at a window's end. At a window's end: end_window(mean loss since the
/// last one) gives the row's accuracy and the bar's summary, then the row, then save(step).
/// `csv` may be null (ranks other than 0 write none).
struct StepLoop {
  struct WindowEnd {
    double accuracy;  // the CSV row's accuracy; NaN: none
    std::string summary;
  };

  StepOptions options;
  tg::optim::Optimizer& opt;
  tg::optim::LRScheduler& sched;
  std::vector<tg::Tensor> params;
  LossLog& log;
  CsvLog* csv = nullptr;
  std::string loss_label = "loss";        // the progress bar's "<label> 1.2345"
  std::function<tg::Tensor()> loss;       // the next batch's loss, on the tape
  std::function<void()> sync_gradients;   // after backward (--distributed); may be empty
  std::function<WindowEnd(double train_loss)> end_window;
  std::function<void(int64_t step)> save;

  /// Runs from `step` (0, or where a resumed run stopped) to options.steps, updating it.
  /// Returns false if it stopped at options.stop_after (after saving).
  bool run(int64_t& step) const;
};

}  // namespace ex
