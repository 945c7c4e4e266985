// char_rnn_classify: which of 11 languages does a word come from? The Elman RNN of our notes
// reads the word one character at a time and classifies it from its last hidden state.
//
//   h_t = tanh(i2h(x_t) + h2h(h_{t-1}))        x_t: one-hot character (V), h_0 = 0
//   log p(lang | word) = log_softmax(h2o(h_T))   T: the word's own last character
//   loss = NLL(log p, true language), averaged over the batch
//
// --cell lstm|gru swaps the Elman cell for an LSTM or GRU cell (same one-hot input, same h2o).
//
// Batching: a batch holds words of different lengths, padded (tg::data::SequenceDataset).
// Inside forward the batch is sorted by length, longest first; at step t only the words that
// still have a character run through the cell (a shrinking prefix of the rows), and a word's
// hidden state is taken at its own last character, so padding never enters the computation.
//
// A run trains, prints a progress bar and per-epoch loss/accuracy, the test confusion matrix,
// saves a checkpoint (model, optimizer, scheduler, data position, RNG, metadata), reloads it
// into a fresh model, checks that the test accuracy is identical and shows a few predictions.
//   --resume            continue the run in --checkpoint (bitwise identical to never stopping)
//   --predict WORD...   load --checkpoint and print the top-3 languages of each word
//   --distributed       data parallel over MPI: `mpirun -np N char_rnn_classify --distributed`;
//                       each rank trains on 1/N of every epoch at --batch words, gradients are
//                       averaged (so N ranks at batch b step like one process at batch N*b);
//                       rank 0 prints and writes the checkpoint, CSV and plot
//
// Legend: B = batch, T = longest word in the batch, V = characters (60), H = hidden size,
// K = languages (11), n_t = words still running at step t.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/parallel.h"
#include "common/progress.h"
#include "common/run_log.h"
#include "common/training.h"
#include "common/words.h"
#include "tapegrad/tapegrad.h"

namespace nn = tg::nn;

namespace {

// ---- the model ----------------------------------------------------------------------------------

/// One-hot characters -> recurrent cell ("cell") -> h2o -> log_softmax over the languages.
class CharClassifier : public nn::Module {
 public:
  CharClassifier(const std::string& cell, int64_t vocab, int64_t hidden, int64_t classes)
      : Module("CharClassifier"), cell_kind(cell), vocab_size(vocab), hidden_size(hidden) {
    if (cell == "rnn")
      rnn = register_module("cell", std::make_shared<nn::RNNCell>(vocab, hidden));
    else if (cell == "lstm")
      lstm = register_module("cell", std::make_shared<nn::LSTMCell>(vocab, hidden));
    else if (cell == "gru")
      gru = register_module("cell", std::make_shared<nn::GRUCell>(vocab, hidden));
    else
      value_error("unknown cell '" + cell + "', expected rnn, lstm or gru");
    h2o = register_module("h2o", std::make_shared<nn::Linear>(hidden, classes));
  }

  /// ids (B, T) padded after each word, lengths (B) -> log-probabilities (B, K), each row read
  /// at that word's own last character.
  tg::Tensor forward(const tg::Indices& ids, const std::vector<int64_t>& lengths) const {
    const int64_t B = static_cast<int64_t>(lengths.size());
    if (ids.shape.size() != 2 || ids.shape[0] != B)
      shape_error("ids of shape " + tg::to_string(ids.shape) + " for " + std::to_string(B) +
                  " lengths, expected (B, T)");
    const int64_t T = ids.shape[1];
    std::vector<int64_t> order(B);  // batch rows, longest word first
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
    for (int64_t len : lengths)
      if (len < 1 || len > T) shape_error("word length " + std::to_string(len) + " outside 1.." + std::to_string(T));
    auto running = [&](int64_t t) {  // n_t: words with more than t characters
      int64_t n = 0;
      while (n < B && lengths[order[n]] > t) ++n;
      return n;
    };

    tg::Tensor h, c;                   // (n_t, H); c only for the LSTM
    std::vector<tg::Tensor> finished;  // blocks of last hidden states, shortest words first
    int64_t n_prev = B;
    for (int64_t t = 0; t < lengths[order[0]]; ++t) {
      const int64_t n = running(t);
      std::vector<float> onehot(static_cast<size_t>(n * vocab_size), 0.0f);  // x_t (n_t, V)
      for (int64_t r = 0; r < n; ++r) {
        const int64_t id = ids.values[order[r] * T + t];
        if (id < 0 || id >= vocab_size)
          shape_error("character id " + std::to_string(id) + " outside the vocabulary of " +
                      std::to_string(vocab_size));
        onehot[r * vocab_size + id] = 1.0f;
      }
      const tg::Tensor x = tg::tensor(onehot, {n, vocab_size});
      if (t > 0 && n < n_prev) {  // the words that ended at t - 1 leave the batch
        h = tg::narrow(h, 0, 0, n);
        if (c.defined()) c = tg::narrow(c, 0, 0, n);
      }
      if (rnn) {
        h = rnn->forward(x, h);
      } else if (lstm) {
        const nn::LSTMState s = lstm->forward(x, {h, c});
        h = s.h;
        c = s.c;
      } else {
        h = gru->forward(x, h);
      }
      const int64_t n_next = running(t + 1);
      if (n_next < n) finished.push_back(n_next == 0 ? h : tg::narrow(h, 0, n_next, n - n_next));
      n_prev = n;
    }
    std::reverse(finished.begin(), finished.end());  // longest first: the rows in `order`
    const tg::Tensor last = finished.size() == 1 ? finished[0] : tg::cat(finished, 0);  // (B, H)
    std::vector<int64_t> inverse(B);  // row of batch word b in `last`
    for (int64_t r = 0; r < B; ++r) inverse[order[r]] = r;
    const tg::Tensor logits = h2o->forward(tg::index_select(last, 0, tg::Indices(inverse, {B})));
    return tg::log_softmax(logits, -1);  // (B, K)
  }

  std::string cell_kind;
  int64_t vocab_size, hidden_size;
  std::shared_ptr<nn::RNNCell> rnn;
  std::shared_ptr<nn::LSTMCell> lstm;
  std::shared_ptr<nn::GRUCell> gru;
  std::shared_ptr<nn::Linear> h2o;  // weight (K, H), bias (K)
};

// ---- configuration ------------------------------------------------------------------------------

struct Config {
  ex::RunOptions run;
  std::string cell = "rnn";
  int64_t hidden = 128;
  int64_t epochs = 20;
  int64_t batch = 32;
  double clip = 5.0;
  int64_t limit = 0;
  int64_t stop_after = 0;
  int64_t log_every = 20;
  bool resume = false;
  bool distributed = false;
  std::vector<std::string> predict;
};

using Loader = tg::data::DataLoader<tg::data::SequenceDataset>;

tg::data::SequenceDataset make_dataset(const ex::LabeledWords& split, const ex::CharVocab& vocab) {
  std::vector<std::vector<int64_t>> seqs;
  seqs.reserve(split.words.size());
  for (const auto& w : split.words) seqs.push_back(vocab.encode(w));
  return tg::data::SequenceDataset(std::move(seqs), split.labels, /*pad_id=*/0);
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? sep : "") + items[i];
  return s;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(' ', start);
    const std::string item = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!item.empty()) out.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * fraction);
  return buf;
}

// ---- evaluation ---------------------------------------------------------------------------------

struct Evaluation {
  double loss = 0;
  double accuracy = 0;
  std::vector<std::vector<int64_t>> confusion;  // [true][predicted]
};

Evaluation evaluate(const CharClassifier& model, const tg::data::SequenceDataset& data, int64_t K) {
  tg::NoGradGuard no_grad;
  Loader loader(data, tg::data::DataLoaderOptions(512));
  Evaluation e;
  e.confusion.assign(K, std::vector<int64_t>(K, 0));
  int64_t correct = 0, total = 0;
  double loss_sum = 0;
  for (const auto& batch : loader) {
    const tg::Tensor logp = model.forward(batch.ids, batch.lengths);  // (B, K)
    const int64_t B = batch.labels.numel();
    loss_sum += tg::nll_loss(logp, batch.labels).item() * B;
    const tg::Indices pred(logp.argmax(1));
    for (int64_t i = 0; i < B; ++i) {
      e.confusion[batch.labels.values[i]][pred.values[i]] += 1;
      correct += pred.values[i] == batch.labels.values[i];
    }
    total += B;
  }
  e.loss = loss_sum / static_cast<double>(total);
  e.accuracy = static_cast<double>(correct) / static_cast<double>(total);
  return e;
}

void print_confusion(const Evaluation& e, const std::vector<std::string>& langs) {
  std::printf("\nconfusion matrix on the test words (rows: true language, columns: predicted)\n      ");
  for (const auto& l : langs) std::printf("%5s", l.c_str());
  std::printf("   correct\n");
  for (size_t r = 0; r < langs.size(); ++r) {
    std::printf("  %-4s", langs[r].c_str());
    int64_t row = 0;
    for (size_t c = 0; c < langs.size(); ++c) {
      std::printf("%5lld", static_cast<long long>(e.confusion[r][c]));
      row += e.confusion[r][c];
    }
    std::printf("   %6.1f%%\n", row ? 100.0 * e.confusion[r][r] / row : 0.0);
  }
}

// ---- checkpoints --------------------------------------------------------------------------------

/// The model described by a checkpoint's metadata, with its weights loaded.
struct LoadedModel {
  std::shared_ptr<CharClassifier> model;
  ex::CharVocab vocab;
  std::vector<std::string> languages;
};

const std::string& meta(const tg::Checkpoint& ck, const std::string& key, const std::string& path) {
  const auto it = ck.metadata.find(key);
  if (it == ck.metadata.end())
    throw tg::CheckpointError(path + ": metadata '" + key + "' missing; not a char_rnn_classify checkpoint?");
  return it->second;
}

LoadedModel load_model(const std::string& path) {
  const tg::Checkpoint ck = tg::Checkpoint::load(path);
  if (meta(ck, "example", path) != "char_rnn_classify")
    throw tg::CheckpointError(path + ": written by '" + meta(ck, "example", path) +
                              "', not char_rnn_classify");
  LoadedModel m;
  m.vocab = ex::CharVocab::from_utf8(meta(ck, "vocab", path));
  m.languages = split_words(meta(ck, "languages", path));
  m.model = std::make_shared<CharClassifier>(meta(ck, "cell", path), m.vocab.size(),
                                             std::stoll(meta(ck, "hidden", path)),
                                             static_cast<int64_t>(m.languages.size()));
  ck.restore_model(*m.model);
  m.model->eval();
  return m;
}

/// The top-3 languages of each word, one line per word.
void print_predictions(const LoadedModel& m, const std::vector<std::u32string>& words,
                       const std::vector<int64_t>& truth = {}) {
  tg::NoGradGuard no_grad;
  std::vector<std::vector<int64_t>> seqs;
  for (const auto& w : words) seqs.push_back(m.vocab.encode(w));
  const tg::data::SequenceDataset ds(seqs, {}, 0);
  std::vector<int64_t> all(words.size());
  std::iota(all.begin(), all.end(), 0);
  const auto batch = ds.get_batch(all);
  const tg::Tensor logp = m.model->forward(batch.ids, batch.lengths);
  const int64_t K = logp.size(1);
  for (size_t i = 0; i < words.size(); ++i) {
    std::vector<int64_t> rank(K);
    std::iota(rank.begin(), rank.end(), 0);
    const float* row = logp.data_ptr() + i * K;
    std::stable_sort(rank.begin(), rank.end(), [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    const std::string w = ex::utf8_encode(words[i]);
    // pad by characters, not bytes
    std::printf("  %s%*s", w.c_str(), static_cast<int>(16 - std::min<size_t>(words[i].size(), 16)), "");
    for (int k = 0; k < 3 && k < K; ++k)
      std::printf("  %-2s %5.1f%%", m.languages[rank[k]].c_str(), 100.0 * std::exp(row[rank[k]]));
    if (!truth.empty())
      std::printf("   (true: %s%s)", m.languages[truth[i]].c_str(), rank[0] == truth[i] ? "" : ", wrong");
    std::printf("\n");
  }
}

int predict(const Config& cfg) {
  const LoadedModel m = load_model(cfg.run.checkpoint);
  std::vector<std::u32string> words;
  for (const auto& w : cfg.predict) {
    words.push_back(ex::to_lower(ex::utf8_decode(w, "--predict")));
    if (words.back().empty()) throw tg::ValueError("--predict: an empty word");
    m.vocab.encode(words.back());  // an unknown character fails here, before any output
  }
  std::printf("%s: %s cell, hidden %lld; top-3 languages:\n", cfg.run.checkpoint.c_str(),
              m.model->cell_kind.c_str(), static_cast<long long>(m.model->hidden_size));
  print_predictions(m, words);
  return 0;
}

// ---- training -----------------------------------------------------------------------------------

/// Running sums of the training loss and accuracy: for the epoch (progress bar, summary) and
/// for the current CSV window. Saved in the checkpoint so a resumed run prints the same.
struct TrainStats {
  double epoch_loss = 0, window_loss = 0;
  int64_t epoch_correct = 0, epoch_seen = 0, epoch_batches = 0;
  int64_t window_correct = 0, window_seen = 0, window_batches = 0;

  tg::StateDict state_dict() const {
    tg::StateDict s;
    s.strings["type"] = "TrainStats";
    s.numbers = {{"epoch_loss", epoch_loss},         {"window_loss", window_loss},
                 {"epoch_correct", double(epoch_correct)}, {"epoch_seen", double(epoch_seen)},
                 {"epoch_batches", double(epoch_batches)}, {"window_correct", double(window_correct)},
                 {"window_seen", double(window_seen)},     {"window_batches", double(window_batches)}};
    return s;
  }
  void load_state_dict(const tg::StateDict& s) {
    const std::string owner = "TrainStats";
    TrainStats t;
    t.epoch_loss = s.number_at("epoch_loss", owner);
    t.window_loss = s.number_at("window_loss", owner);
    t.epoch_correct = static_cast<int64_t>(s.number_at("epoch_correct", owner));
    t.epoch_seen = static_cast<int64_t>(s.number_at("epoch_seen", owner));
    t.epoch_batches = static_cast<int64_t>(s.number_at("epoch_batches", owner));
    t.window_correct = static_cast<int64_t>(s.number_at("window_correct", owner));
    t.window_seen = static_cast<int64_t>(s.number_at("window_seen", owner));
    t.window_batches = static_cast<int64_t>(s.number_at("window_batches", owner));
    *this = t;
  }
};

std::map<std::string, std::string> run_metadata(const Config& cfg, const ex::CharVocab& vocab,
                                                const std::vector<std::string>& languages) {
  return {{"example", "char_rnn_classify"},
          {"cell", cfg.cell},
          {"hidden", std::to_string(cfg.hidden)},
          {"vocab", vocab.chars_utf8()},
          {"languages", join(languages, " ")},
          {"epochs", std::to_string(cfg.epochs)},
          {"batch", std::to_string(cfg.batch)},
          {"lr", std::to_string(cfg.run.lr)},
          {"clip", std::to_string(cfg.clip)},
          {"seed", std::to_string(cfg.run.seed)},
          {"limit", std::to_string(cfg.limit)},
          {"optimizer", "Adam"},
          {"scheduler", "CosineAnnealingLR per step"}};
}

int train(const Config& cfg) {
  ex::apply_run_options(cfg.run);
  ex::Parallel par(cfg.distributed);  // --distributed: MPI; only rank 0 prints
  const ex::WordsData data = ex::load_words(cfg.run.data, cfg.limit);
  // Train covers every character of val and test (datasets/README.md); with --limit it may not.
  std::vector<std::u32string> all_words = data.train.words;
  all_words.insert(all_words.end(), data.val.words.begin(), data.val.words.end());
  all_words.insert(all_words.end(), data.test.words.begin(), data.test.words.end());
  const ex::CharVocab vocab(all_words);
  const int64_t K = static_cast<int64_t>(data.languages.size());
  const auto train_set = make_dataset(data.train, vocab);
  const auto val_set = make_dataset(data.val, vocab);
  const auto test_set = make_dataset(data.test, vocab);
  std::printf("data: %s: %lld train, %lld val, %lld test words; %lld languages (%s); %lld characters\n",
              cfg.run.data.c_str(), static_cast<long long>(data.train.size()),
              static_cast<long long>(data.val.size()), static_cast<long long>(data.test.size()),
              static_cast<long long>(K), join(data.languages, " ").c_str(),
              static_cast<long long>(vocab.size()));

  auto model = std::make_shared<CharClassifier>(cfg.cell, vocab.size(), cfg.hidden, K);
  par.wrap(model);  // rank 0's initial weights everywhere
  Loader loader(train_set,
                par.shard(tg::data::DataLoaderOptions(cfg.batch).shuffle(true).seed(cfg.run.seed)));
  const int64_t total_steps = cfg.epochs * loader.num_batches();
  tg::optim::Adam opt(model->parameters(), tg::optim::AdamOptions(cfg.run.lr));
  tg::optim::CosineAnnealingLR sched(opt, std::max<int64_t>(total_steps, 1), cfg.run.lr * 0.02);
  TrainStats stats;
  auto metadata = run_metadata(cfg, vocab, data.languages);
  if (par.on()) metadata["ranks"] = std::to_string(par.world_size());

  int64_t step = 0;
  if (cfg.resume) {
    const tg::Checkpoint ck = par.load(cfg.run.checkpoint);
    const auto written_by = ck.metadata.find("example");  // first: another example's file
    if (written_by == ck.metadata.end() || written_by->second != "char_rnn_classify")
      throw tg::CheckpointError("--resume: " + cfg.run.checkpoint + " was written by " +
                                (written_by == ck.metadata.end() ? std::string("no example (it has no 'example' metadata)")
                                                                 : "'" + written_by->second + "'") +
                                ", not by char_rnn_classify");
    for (const auto& [key, value] : metadata) {
      const auto it = ck.metadata.find(key);
      if (it == ck.metadata.end() || it->second != value)
        throw tg::ValueError("--resume: " + cfg.run.checkpoint + " has " + key + " = '" +
                             (it == ck.metadata.end() ? "(none)" : it->second) +
                             "', this run has '" + value + "'; resume with the same options");
    }
    ck.restore(*model, {{"optimizer", opt}, {"scheduler", sched}, {"data", loader}, {"stats", stats}});
    step = ck.step;
    std::printf("resumed %s at step %lld (epoch %lld of %lld)\n", cfg.run.checkpoint.c_str(),
                static_cast<long long>(step), static_cast<long long>(loader.epoch() + 1),
                static_cast<long long>(cfg.epochs));
  }
  std::printf("model: %s cell, hidden %lld, %lld parameters; Adam lr %g (cosine to %g), batch %lld, "
              "%lld epochs of %lld steps\n",
              cfg.cell.c_str(), static_cast<long long>(cfg.hidden),
              static_cast<long long>(model->num_parameters()), cfg.run.lr, cfg.run.lr * 0.02,
              static_cast<long long>(cfg.batch), static_cast<long long>(cfg.epochs),
              static_cast<long long>(loader.num_batches()));
  if (par.on())
    std::printf("distributed: %d ranks, each on 1/%d of every epoch at batch %lld (global batch %lld)\n",
                par.world_size(), par.world_size(), static_cast<long long>(cfg.batch),
                static_cast<long long>(cfg.batch * par.world_size()));

  const std::string csv_path = ex::sibling_path(cfg.run.checkpoint, ".csv");
  std::optional<ex::CsvLog> csv;  // rank 0's
  if (par.is_main()) csv.emplace(csv_path, cfg.resume ? step : -1);
  auto save = [&] {  // the RNG too, as it is now
    tg::Checkpoint ck = ex::snapshot(
        *model, {{"optimizer", opt}, {"scheduler", sched}, {"data", loader}, {"stats", stats}}, step);
    ck.epoch = loader.epoch();
    ck.metadata = metadata;
    if (par.is_main()) ex::make_parent_dirs(cfg.run.checkpoint);
    par.save(ck, cfg.run.checkpoint);  // with --distributed rank 0 writes, all ranks wait
  };

  ex::Stopwatch clock;
  const int width = static_cast<int>(std::to_string(cfg.epochs).size());
  while (loader.epoch() < cfg.epochs) {
    const int64_t epoch = loader.epoch();
    char label[64];
    std::snprintf(label, sizeof label, "epoch %*lld/%lld", width, static_cast<long long>(epoch + 1),
                  static_cast<long long>(cfg.epochs));
    ex::ProgressBar bar(label, loader.num_batches());
    model->train();
    bool stopped = false;
    for (const auto& batch : loader) {
      const tg::Tensor logp = model->forward(batch.ids, batch.lengths);  // (B, K)
      const tg::Tensor loss = tg::nll_loss(logp, batch.labels);
      opt.zero_grad();
      loss.backward();
      par.sync_gradients();  // --distributed: the mean over the ranks
      if (cfg.clip > 0) nn::utils::clip_grad_norm_(model->parameters(), cfg.clip);
      const double lr = opt.param_groups()[0].lr();
      ex::check_loss(loss.item(), step + 1, lr);
      opt.step();
      sched.step();
      ++step;

      const int64_t B = batch.labels.numel();
      const tg::Indices pred(logp.argmax(1));
      int64_t correct = 0;
      for (int64_t i = 0; i < B; ++i) correct += pred.values[i] == batch.labels.values[i];
      const double l = loss.item();
      stats.epoch_loss += l;
      stats.window_loss += l;
      stats.epoch_batches += 1;
      stats.window_batches += 1;
      stats.epoch_correct += correct;
      stats.window_correct += correct;
      stats.epoch_seen += B;
      stats.window_seen += B;
      if (stats.window_batches == cfg.log_every) {
        if (csv) csv->add(step, stats.window_loss / stats.window_batches, lr,
                double(stats.window_correct) / double(stats.window_seen));
        stats.window_loss = 0;
        stats.window_batches = stats.window_correct = stats.window_seen = 0;
      }
      char status[96];
      std::snprintf(status, sizeof status, "loss %.4f  acc %5.1f%%",
                    stats.epoch_loss / stats.epoch_batches,
                    100.0 * stats.epoch_correct / stats.epoch_seen);
      bar.update(loader.batch_index() == 0 ? loader.num_batches() : loader.batch_index(), status);
      if (cfg.stop_after > 0 && step == cfg.stop_after) {
        stopped = true;
        break;
      }
    }
    if (stopped) {
      save();
      bar.finish("stopped at step " + std::to_string(step) + " (--stop-after); checkpoint saved");
      std::printf("resume with the same options and --resume\n");
      return 0;
    }
    const Evaluation val = par.is_main() ? evaluate(*model, val_set, K) : Evaluation();
    char summary[160];
    std::snprintf(summary, sizeof summary,
                  "loss %.4f  train acc %5.1f%%  val loss %.4f  val acc %5.1f%%  lr %.2e  %5.1fs",
                  stats.epoch_loss / stats.epoch_batches,
                  100.0 * stats.epoch_correct / stats.epoch_seen, val.loss, 100.0 * val.accuracy,
                  opt.param_groups()[0].lr(), clock.seconds());
    bar.finish(summary);
    stats.epoch_loss = 0;
    stats.epoch_batches = stats.epoch_correct = stats.epoch_seen = 0;
    save();
  }
  if (!par.is_main()) return 0;  // testing, reloading and plotting: rank 0's

  const Evaluation test = evaluate(*model, test_set, K);
  print_confusion(test, data.languages);
  std::printf("\ntest accuracy: %s (%lld words, chance %.1f%%), test loss %.4f; training took %.1fs\n",
              percent(test.accuracy).c_str(), static_cast<long long>(test_set.size()),
              100.0 / K, test.loss, clock.seconds());
  std::printf("checkpoint: %s\n", cfg.run.checkpoint.c_str());

  // Reload into a fresh model built from the checkpoint's metadata alone.
  const LoadedModel reloaded = load_model(cfg.run.checkpoint);
  const Evaluation again = evaluate(*reloaded.model, make_dataset(data.test, reloaded.vocab), K);
  std::printf("reloaded:   test accuracy %s, test loss %.4f (%s)\n", percent(again.accuracy).c_str(),
              again.loss,
              again.accuracy == test.accuracy && again.loss == test.loss ? "identical" : "DIFFERENT");
  if (again.accuracy != test.accuracy || again.loss != test.loss)
    throw tg::CheckpointError("the reloaded model's test results differ from the trained model's");

  std::printf("\na few test words, top-3 languages from the reloaded model:\n");
  std::vector<std::u32string> words;
  std::vector<int64_t> truth;
  for (int64_t i = 0; i < std::min<int64_t>(8, data.test.size()); ++i) {
    words.push_back(data.test.words[i]);
    truth.push_back(data.test.labels[i]);
  }
  print_predictions(reloaded, words, truth);

  const std::string png = ex::sibling_path(cfg.run.checkpoint, ".png");
  if (ex::plot_loss_curve(csv_path, png, "char_rnn_classify (" + cfg.cell + ", hidden " +
                                             std::to_string(cfg.hidden) + ")"))
    std::printf("\ntraining curve: %s, %s\n", csv_path.c_str(), png.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  cfg.run.lr = 3e-3;
  cfg.run.checkpoint = "checkpoints/char_rnn_classify.ckpt";
  cfg.run.data = ex::words_dir();

  CLI::App app{"Character-level RNN that tells which of 11 languages a word comes from."};
  app.add_option("--cell", cfg.cell, "recurrent cell: rnn (Elman), lstm or gru")
      ->capture_default_str()
      ->check(CLI::IsMember({"rnn", "lstm", "gru"}));
  app.add_option("--hidden", cfg.hidden, "hidden size")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--epochs", cfg.epochs, "training epochs")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--batch", cfg.batch, "words per batch (per rank with --distributed)")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--clip", cfg.clip, "clip the gradient norm to this (0: off)")
      ->capture_default_str()
      ->check(ex::kFiniteNonNegative);
  ex::add_run_options(app, cfg.run, "directory with languages.txt and {train,val,test}.tsv");
  auto* resume = app.add_flag("--resume", cfg.resume, "continue the run saved in --checkpoint (same options)");
  auto* distributed = app.add_flag(
      "--distributed", cfg.distributed,
      "data parallel over MPI: run as mpirun -np N char_rnn_classify --distributed");
  app.add_option("--predict", cfg.predict, "load --checkpoint and print the top-3 languages of each WORD")
      ->type_name("WORD...")
      ->excludes(resume)
      ->excludes(distributed);
  app.add_option("--limit", cfg.limit, "use only the first N words of each split (quick runs)")
      ->check(ex::kFiniteNonNegative);
  app.add_option("--stop-after", cfg.stop_after,
                 "stop after N training steps and save the checkpoint, as if interrupted")
      ->check(ex::kFiniteNonNegative);
  app.add_option("--log-every", cfg.log_every, "steps per CSV row")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  return ex::run_main(app, argc, argv, [&] {
    if (!cfg.predict.empty()) {
      ex::apply_run_options(cfg.run);
      return predict(cfg);
    }
    return train(cfg);
  });
}
