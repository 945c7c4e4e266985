// transformer_sort: a small transformer learns to sort (or reverse) digit sequences. The end-to-end
// proof that attention trains: no position of the output can be written without looking at
// the whole input.
//
//   transformer_sort                           train (under half a minute), report exact-match accuracy
//   transformer_sort --eval                    reload the checkpoint and evaluate it again
//   transformer_sort --predict 90210451        sort one sequence with the checkpoint
//
// Task: x = n digits (n uniform in [min_len, max_len]), padded with <pad> to max_len; the
// target at position i is the i-th smallest digit (sort) or x[n-1-i] (reverse), and <pad> past
// n. The model is encoder-style: token + learned position embeddings, pre-LN blocks with
// bidirectional attention, a final LayerNorm and a Linear head predicting every output
// position at once. Training sequences are drawn on the fly from the global generator (so the
// checkpoint's RNG state continues the stream); the held-out set is drawn from its own
// generator seeded with seed + 1, and never appears in training.
//
// Legend: B = batch, L = max_len, C = d_model, V = 11 (digits 0-9 and <pad> = 10).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/cli.h"
#include "common/progress.h"
#include "common/run_log.h"
#include "common/training.h"
#include "tapegrad/tapegrad.h"

namespace {

constexpr int64_t kPad = 10;
constexpr int64_t kVocab = 11;

/// The task and the model's shape: everything --eval needs, stored as checkpoint metadata.
struct Config {
  std::string task = "sort";  // sort | reverse
  int64_t min_len = 6, max_len = 8;
  int64_t d_model = 64, n_layers = 2, n_heads = 4, d_ff = 256;
  uint64_t test_seed = 2;
  int64_t test_size = 2000;

  void to_metadata(std::map<std::string, std::string>& m) const {
    m["example"] = "transformer_sort";
    m["task"] = task;
    m["min_len"] = std::to_string(min_len);
    m["max_len"] = std::to_string(max_len);
    m["d_model"] = std::to_string(d_model);
    m["n_layers"] = std::to_string(n_layers);
    m["n_heads"] = std::to_string(n_heads);
    m["d_ff"] = std::to_string(d_ff);
    m["test_seed"] = std::to_string(test_seed);
    m["test_size"] = std::to_string(test_size);
  }
  static Config from_metadata(const std::map<std::string, std::string>& m, const std::string& path) {
    const ex::ExampleMetadata meta(m, path, "transformer_sort");
    Config c;
    try {
      c.task = meta.at("task");
      c.min_len = std::stoll(meta.at("min_len"));
      c.max_len = std::stoll(meta.at("max_len"));
      c.d_model = std::stoll(meta.at("d_model"));
      c.n_layers = std::stoll(meta.at("n_layers"));
      c.n_heads = std::stoll(meta.at("n_heads"));
      c.d_ff = std::stoll(meta.at("d_ff"));
      c.test_seed = std::stoull(meta.at("test_seed"));
      c.test_size = std::stoll(meta.at("test_size"));
    } catch (const std::logic_error&) {  // stoll / stoull
      throw tg::CheckpointError(path + ": malformed task or model configuration in the metadata");
    }
    if (c.task != "sort" && c.task != "reverse")
      throw tg::CheckpointError(path + ": unknown task '" + c.task + "' in the metadata");
    return c;
  }
};

/// Inputs (N, L) and targets (N, L) as flat row-major ids.
struct Examples {
  std::vector<int64_t> inputs, targets;
  int64_t size(int64_t L) const { return static_cast<int64_t>(inputs.size()) / L; }
};

/// The target row of one input row (digits then <pad>).
std::vector<int64_t> solve(const std::string& task, std::vector<int64_t> digits, int64_t L) {
  if (task == "sort")
    std::sort(digits.begin(), digits.end());
  else
    std::reverse(digits.begin(), digits.end());
  digits.resize(static_cast<size_t>(L), kPad);
  return digits;
}

/// One random sequence of digits, its length uniform in [min_len, max_len].
std::vector<int64_t> draw(tg::Generator& gen, const Config& c) {
  const int64_t n = c.min_len + static_cast<int64_t>(gen.below(static_cast<uint64_t>(c.max_len - c.min_len + 1)));
  std::vector<int64_t> d(static_cast<size_t>(n));
  for (auto& v : d) v = static_cast<int64_t>(gen.below(10));
  return d;
}

std::string key_of(const std::vector<int64_t>& digits) {
  std::string k;
  for (const int64_t d : digits) k += static_cast<char>('0' + d);
  return k;
}

void append(Examples& ex, const Config& c, const std::vector<int64_t>& digits) {
  std::vector<int64_t> in = digits;
  in.resize(static_cast<size_t>(c.max_len), kPad);
  const auto out = solve(c.task, digits, c.max_len);
  ex.inputs.insert(ex.inputs.end(), in.begin(), in.end());
  ex.targets.insert(ex.targets.end(), out.begin(), out.end());
}

/// The held-out set: distinct sequences from a generator of its own.
Examples held_out(const Config& c, std::unordered_set<std::string>& keys) {
  double possible = 0;  // distinct sequences of every allowed length
  for (int64_t n = c.min_len; n <= c.max_len; ++n) possible += std::pow(10.0, static_cast<double>(n));
  if (static_cast<double>(c.test_size) > possible / 10)
    throw tg::ValueError("--test-size " + std::to_string(c.test_size) + " is more than a tenth of the " +
                         std::to_string(static_cast<int64_t>(possible)) + " possible sequences; lengthen them");
  tg::Generator gen(c.test_seed);
  Examples ex;
  while (static_cast<int64_t>(keys.size()) < c.test_size) {
    const auto d = draw(gen, c);
    if (keys.insert(key_of(d)).second) append(ex, c, d);
  }
  return ex;
}

/// Encoder-style transformer: (B, L) ids -> (B, L, V) logits, bidirectional attention.
class SortTransformer : public tg::nn::Module {
 public:
  explicit SortTransformer(const Config& c) : Module("SortTransformer"), config(c) {
    tok_emb = register_module("tok_emb", std::make_shared<tg::nn::Embedding>(kVocab, c.d_model));
    pos_emb = register_module("pos_emb", std::make_shared<tg::nn::Embedding>(c.max_len, c.d_model));
    blocks = register_module("blocks", std::make_shared<tg::nn::ModuleList>());
    for (int64_t i = 0; i < c.n_layers; ++i)
      blocks->push_back(
          std::make_shared<tg::nn::TransformerBlock>(tg::nn::TransformerBlockOptions(c.d_model, c.n_heads, c.d_ff)));
    ln_f = register_module("ln_f", std::make_shared<tg::nn::LayerNorm>(c.d_model));
    head = register_module("head", std::make_shared<tg::nn::Linear>(c.d_model, kVocab));
    ex::init_gpt2_(*this);
  }

  /// ids (B, L) -> logits (B, L, V)
  tg::Tensor forward(const tg::Indices& ids) {
    if (ids.shape.size() != 2 || ids.shape[1] != config.max_len)
      shape_error("ids " + tg::to_string(ids.shape) + ", expected (B, " + std::to_string(config.max_len) + ")");
    std::vector<int64_t> pos(static_cast<size_t>(config.max_len));
    for (int64_t t = 0; t < config.max_len; ++t) pos[static_cast<size_t>(t)] = t;
    tg::Tensor x = tok_emb->forward(ids) + pos_emb->forward(tg::Indices(pos, {config.max_len}));  // (B, L, C)
    for (const auto& block : *blocks) x = block(x);  // each item is callable: a TransformerBlock
    return head->forward(ln_f->forward(x));
  }

  Config config;
  std::shared_ptr<tg::nn::Embedding> tok_emb, pos_emb;
  std::shared_ptr<tg::nn::ModuleList> blocks;
  std::shared_ptr<tg::nn::LayerNorm> ln_f;
  std::shared_ptr<tg::nn::Linear> head;
};

/// argmax predictions (N, L) for every example, in eval mode without the tape.
std::vector<int64_t> predict(SortTransformer& model, const std::vector<int64_t>& inputs) {
  tg::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const int64_t L = model.config.max_len, N = static_cast<int64_t>(inputs.size()) / L;
  std::vector<int64_t> out;
  for (int64_t start = 0; start < N; start += 500) {
    const int64_t B = std::min<int64_t>(500, N - start);
    const std::vector<int64_t> ids(inputs.begin() + start * L, inputs.begin() + (start + B) * L);
    const tg::Tensor logits = model.forward(tg::Indices(ids, {B, L}));
    const float* l = logits.data_ptr();
    for (int64_t i = 0; i < B * L; ++i) out.push_back(std::max_element(l + i * kVocab, l + (i + 1) * kVocab) - (l + i * kVocab));
  }
  model.train(was_training);
  return out;
}

/// Fraction of rows predicted exactly (every position).
double exact_match(SortTransformer& model, const Examples& ex) {
  const int64_t L = model.config.max_len;
  const auto pred = predict(model, ex.inputs);
  int64_t ok = 0;
  for (int64_t i = 0; i < ex.size(L); ++i)
    ok += std::equal(pred.begin() + i * L, pred.begin() + (i + 1) * L, ex.targets.begin() + i * L);
  return static_cast<double>(ok) / static_cast<double>(ex.size(L));
}

std::string show(const int64_t* ids, int64_t L) {
  std::string s;
  for (int64_t i = 0; i < L; ++i) s += ids[i] == kPad ? '.' : static_cast<char>('0' + ids[i]);
  return s;
}

/// The first few held-out examples: input -> prediction (and whether it is right).
void print_examples(SortTransformer& model, const Examples& ex, int64_t n) {
  const int64_t L = model.config.max_len;
  n = std::min(n, ex.size(L));
  const std::vector<int64_t> inputs(ex.inputs.begin(), ex.inputs.begin() + n * L);
  const auto pred = predict(model, inputs);
  for (int64_t i = 0; i < n; ++i) {
    const bool ok = std::equal(pred.begin() + i * L, pred.begin() + (i + 1) * L, ex.targets.begin() + i * L);
    std::printf("  %s -> %s  %s\n", show(&inputs[static_cast<size_t>(i * L)], L).c_str(),
                show(&pred[static_cast<size_t>(i * L)], L).c_str(), ok ? "ok" : "WRONG");
  }
}

std::shared_ptr<SortTransformer> load_model(const std::string& path, tg::Checkpoint& ck) {
  ck = tg::Checkpoint::load(path);
  auto model = std::make_shared<SortTransformer>(Config::from_metadata(ck.metadata, path));
  ck.restore_model(*model);
  return model;
}

struct Args {
  ex::RunOptions run;
  ex::StepOptions loop;  // --steps --eval-every --log-every --stop-after
  Config config;
  int64_t batch = 128;
  int64_t warmup = 100;
  double weight_decay = 0.01;
  bool resume = false, eval = false;
  std::string predict;
};

int run_eval(const Args& a) {
  tg::Checkpoint ck;
  auto model = load_model(a.run.checkpoint, ck);
  const Config& c = model->config;
  std::unordered_set<std::string> keys;
  const Examples test = held_out(c, keys);
  std::printf("%s: %s, lengths %lld-%lld, step %lld\n", a.run.checkpoint.c_str(), c.task.c_str(),
              static_cast<long long>(c.min_len), static_cast<long long>(c.max_len), static_cast<long long>(ck.step));
  std::printf("held-out exact-match accuracy %.2f%% of %lld sequences\n", 100 * exact_match(*model, test),
              static_cast<long long>(c.test_size));
  print_examples(*model, test, 5);
  return 0;
}

int run_predict(const Args& a) {
  tg::Checkpoint ck;
  auto model = load_model(a.run.checkpoint, ck);
  const Config& c = model->config;
  std::vector<int64_t> digits;
  for (const char ch : a.predict) {
    if (ch < '0' || ch > '9') throw tg::ValueError("--predict takes digits only, got '" + a.predict + "'");
    digits.push_back(ch - '0');
  }
  const int64_t n = static_cast<int64_t>(digits.size());
  if (n < 1 || n > c.max_len)
    throw tg::ValueError("--predict: " + std::to_string(n) + " digits, this model takes 1 to " +
                         std::to_string(c.max_len) + " (trained on " + std::to_string(c.min_len) + " to " +
                         std::to_string(c.max_len) + ")");
  Examples one;
  append(one, c, digits);
  const auto pred = predict(*model, one.inputs);
  std::printf("%s -> %s  (%s: %s)\n", show(one.inputs.data(), c.max_len).c_str(), show(pred.data(), c.max_len).c_str(),
              c.task.c_str(), show(one.targets.data(), c.max_len).c_str());
  return 0;
}

int run_train(Args a) {
  const ex::Stopwatch watch;
  Config& c = a.config;
  c.test_seed = a.run.seed + 1;
  if (c.min_len < 1 || c.min_len > c.max_len)
    throw tg::ValueError("--min-len " + std::to_string(c.min_len) + " and --max-len " + std::to_string(c.max_len) +
                         ": need 1 <= min-len <= max-len");
  std::shared_ptr<SortTransformer> model;
  tg::Checkpoint resumed;
  if (a.resume) {
    model = load_model(a.run.checkpoint, resumed);
    c = model->config;
  } else {
    model = std::make_shared<SortTransformer>(c);
  }
  std::unordered_set<std::string> held_keys;
  const Examples test = held_out(c, held_keys);
  std::printf("task: %s digit sequences of length %lld-%lld; held-out set: %lld sequences (seed %llu)\n",
              c.task.c_str(), static_cast<long long>(c.min_len), static_cast<long long>(c.max_len),
              static_cast<long long>(c.test_size), static_cast<unsigned long long>(c.test_seed));
  std::printf("model: %lld parameters, d_model %lld, %lld layers, %lld heads; %s\n",
              static_cast<long long>(model->num_parameters()), static_cast<long long>(c.d_model),
              static_cast<long long>(c.n_layers), static_cast<long long>(c.n_heads), tg::device_status().c_str());

  tg::optim::AdamW opt(model->parameters(), tg::optim::AdamWOptions(a.run.lr).weight_decay(a.weight_decay));
  tg::optim::WarmupCosineLR sched(opt, std::min(a.warmup, a.loop.steps / 10), a.loop.steps, 0.0);
  ex::LossLog log;
  int64_t step = 0;
  if (a.resume) {  // the RNG too: the training stream continues where it stopped
    ex::check_same_schedule(resumed, a.run.checkpoint, a.loop.steps, a.run.lr);
    resumed.restore(*model, {{"optimizer", opt}, {"scheduler", sched}, {"log", log}});
    step = resumed.step;
    std::printf("resumed %s at step %lld\n", a.run.checkpoint.c_str(), static_cast<long long>(step));
  }

  ex::make_parent_dirs(a.run.checkpoint);
  ex::CsvLog csv(ex::sibling_path(a.run.checkpoint, ".csv"), a.resume ? step : -1);
  const int64_t L = c.max_len;
  int64_t skipped = 0;
  ex::StepLoop loop{a.loop, opt, sched, model->parameters(), log};
  loop.csv = &csv;
  loop.loss = [&] {
    Examples batch;
    while (batch.size(L) < a.batch) {
      const auto d = draw(tg::default_generator(), c);
      if (held_keys.count(key_of(d))) {
        ++skipped;
        continue;
      }
      append(batch, c, d);
    }
    const tg::Tensor logits = model->forward(tg::Indices(batch.inputs, {a.batch, L}));  // (B, L, V)
    return tg::cross_entropy(tg::reshape(logits, {-1, kVocab}), tg::Indices(batch.targets, {a.batch * L}));
  };
  loop.end_window = [&](double train_loss) {
    const double acc = exact_match(*model, test);
    char summary[160];
    std::snprintf(summary, sizeof summary, "loss %.4f  held-out exact match %6.2f%%  lr %.2e  %4.0f s", train_loss,
                  100 * acc, log.lr, watch.seconds());
    return ex::StepLoop::WindowEnd{acc, summary};
  };
  loop.save = [&](int64_t at) {  // the generator too: a resumed run draws the same next batches
    tg::Checkpoint ck = ex::snapshot(*model, {{"optimizer", opt}, {"scheduler", sched}, {"log", log}}, at);
    c.to_metadata(ck.metadata);
    ck.save(a.run.checkpoint);
  };
  model->train();
  if (!loop.run(step)) return 0;  // --stop-after
  std::printf("\nheld-out exact-match accuracy %.2f%% of %lld sequences after %lld steps (%.1f s)\n",
              100 * exact_match(*model, test), static_cast<long long>(c.test_size), static_cast<long long>(step),
              watch.seconds());
  // Reload the checkpoint into a fresh model: the same predictions on the whole held-out set.
  tg::Checkpoint ck;
  auto reloaded = load_model(a.run.checkpoint, ck);
  const bool same = predict(*reloaded, test.inputs) == predict(*model, test.inputs);
  std::printf("reloaded %s: held-out predictions %s\n", a.run.checkpoint.c_str(), same ? "identical" : "DIFFERENT");
  if (!same) throw tg::CheckpointError("the reloaded model differs from the trained one");
  print_examples(*reloaded, test, 5);
  if (skipped) std::printf("(%lld drawn training sequences were held-out ones and were skipped)\n",
                           static_cast<long long>(skipped));
  const std::string png = ex::sibling_path(a.run.checkpoint, ".png");
  if (ex::plot_loss_curve(csv.path(), png, "transformer_sort (" + c.task + ")", "held-out exact match"))
    std::printf("checkpoint %s, log %s, plot %s\n", a.run.checkpoint.c_str(), csv.path().c_str(), png.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"transformer_sort: a small transformer learns to sort (or reverse) digit sequences"};
  app.name("transformer_sort");
  Args a;
  a.run.lr = 3e-3;
  a.run.seed = 1;
  a.run.checkpoint = "checkpoints/transformer_sort.ckpt";
  ex::add_run_options(app, a.run);
  app.remove_option(app.get_option("--data"));  // the data are generated
  app.add_option("--steps", a.loop.steps, "optimizer steps in all")->check(CLI::Range(int64_t{1}, int64_t{1000000000}))->capture_default_str();
  app.add_option("--batch", a.batch, "sequences per batch")->check(CLI::Range(int64_t{1}, int64_t{1000000000}))->capture_default_str();
  app.add_option("--eval-every", a.loop.eval_every, "steps between held-out evaluations and checkpoints")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000000}))->capture_default_str();
  app.add_option("--log-every", a.loop.log_every, "steps between CSV rows")->check(CLI::Range(int64_t{1}, int64_t{1000000000}))->capture_default_str();
  app.add_option("--task", a.config.task, "what to learn")->check(CLI::IsMember({"sort", "reverse"}))
      ->capture_default_str();
  app.add_option("--min-len", a.config.min_len, "shortest sequence")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--max-len", a.config.max_len, "longest sequence")->check(CLI::Range(1, 64))->capture_default_str();
  ex::add_transformer_options(app, a.config.d_model, a.config.n_layers, a.config.n_heads, a.config.d_ff);
  app.add_option("--test-size", a.config.test_size, "held-out sequences")->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_flag("--resume", a.resume, "continue the run saved in --checkpoint (same --steps, --lr)");
  app.add_option("--stop-after", a.loop.stop_after, "stop after step N and save the checkpoint, as if interrupted")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000000}));
  auto* eval = app.add_flag("--eval", a.eval, "evaluate --checkpoint on its held-out set and exit");
  app.add_option("--predict", a.predict, "sort/reverse these digits with --checkpoint and exit")->excludes(eval);
  return ex::run_main(app, argc, argv, [&] {
    ex::apply_run_options(a.run);
    if (a.eval) return run_eval(a);
    if (!a.predict.empty()) return run_predict(a);
    return run_train(a);
  });
}
