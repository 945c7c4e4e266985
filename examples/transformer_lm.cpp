// transformer_lm: a small GPT-style transformer that writes new words of a chosen language,
// one character at a time (makemore-style), trained on the shipped words (datasets/words).
//
//   transformer_lm                            train (a few minutes); checkpoints/transformer_lm.ckpt
//   transformer_lm --sample 10 --lang fr      ten new French words from the checkpoint alone
//                                             (through a KV cache; --no-cache recomputes)
//   transformer_lm --resume                   continue an interrupted run (same options)
//   mpirun -np N transformer_lm --distributed data parallel: each rank takes --batch words of
//                                             its 1/N of the data, gradients are averaged;
//                                             rank 0 prints and writes the checkpoint
//
// A word c1 … cn of language ℓ is the sequence  <ℓ> c1 … cn <end>: the model reads <ℓ> c1 … cn
// and predicts c1 … cn <end>, position t seeing only positions ≤ t (causal attention). Losses
// are the mean negative log-likelihood per predicted character in nats, <end> included. The
// same program fits a bigram baseline on the training words, P(c_t | c_{t-1}, ℓ) with add-one
// smoothing (c_0 = <ℓ>), and prints its loss beside the model's.
//
// The checkpoint holds the model, AdamW, the warmup-cosine schedule, the data position, the
// step, the RNG, and as metadata the model's shape and vocabulary, so --sample rebuilds the
// model from the file alone.
//
// Legend: B = batch, T = sequence length (≤ block_size), C = d_model, V = vocabulary
// (<end>, the characters, one token per language).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/parallel.h"
#include "common/progress.h"
#include "common/run_log.h"
#include "common/training.h"
#include "common/words.h"
#include "tapegrad/tapegrad.h"

namespace {

using Seq = std::vector<int64_t>;

/// Token ids: 0 = <end>, 1 … n = the characters (CharVocab id + 1), then the languages.
struct Vocab {
  ex::CharVocab chars;
  std::vector<std::string> languages;

  int64_t n_chars() const { return chars.size(); }
  int64_t size() const { return 1 + n_chars() + static_cast<int64_t>(languages.size()); }
  int64_t lang_token(int64_t lang) const { return 1 + n_chars() + lang; }
  /// The index of `code` in languages; tg::ValueError listing them if unknown.
  int64_t lang_index(const std::string& code) const {
    const auto it = std::find(languages.begin(), languages.end(), code);
    if (it == languages.end()) {
      std::string all;
      for (const auto& l : languages) all += " " + l;
      throw tg::ValueError("unknown language '" + code + "'; this model knows" + all);
    }
    return it - languages.begin();
  }
  /// <ℓ> c1 … cn <end>
  Seq encode(const std::u32string& word, int64_t lang) const {
    Seq s = {lang_token(lang)};
    for (const int64_t id : chars.encode(word)) s.push_back(id + 1);
    s.push_back(0);
    return s;
  }
  std::string decode(const Seq& s) const {  // the characters after <ℓ>, up to <end>
    std::u32string w;
    for (size_t t = 1; t < s.size() && s[t] != 0; ++t) w += chars.at(s[t] - 1);
    return ex::utf8_encode(w);
  }
};

/// The model's shape: everything needed to rebuild it, stored in the checkpoint's metadata.
struct Config {
  int64_t d_model = 96, n_layers = 3, n_heads = 4, d_ff = 384, block_size = 16;
  float dropout = 0.1f;
};

/// Decoder-only transformer: token + learned position embeddings, n_layers pre-LN blocks with
/// causal self-attention, a final LayerNorm and a Linear head.
class GPT : public tg::nn::Module {
 public:
  GPT(const Config& c, int64_t vocab_size) : Module("GPT"), config(c) {
    tok_emb = register_module("tok_emb", std::make_shared<tg::nn::Embedding>(vocab_size, c.d_model));
    pos_emb = register_module("pos_emb", std::make_shared<tg::nn::Embedding>(c.block_size, c.d_model));
    drop = register_module("drop", std::make_shared<tg::nn::Dropout>(c.dropout));
    blocks = register_module("blocks", std::make_shared<tg::nn::ModuleList>());
    for (int64_t i = 0; i < c.n_layers; ++i)
      blocks->push_back(std::make_shared<tg::nn::TransformerBlock>(
          tg::nn::TransformerBlockOptions(c.d_model, c.n_heads, c.d_ff).dropout(c.dropout)));
    ln_f = register_module("ln_f", std::make_shared<tg::nn::LayerNorm>(c.d_model));
    head = register_module("head", std::make_shared<tg::nn::Linear>(c.d_model, vocab_size));
    ex::init_gpt2_(*this);
  }

  /// ids (B, T) -> logits (B, T, V)
  tg::Tensor forward(const tg::Indices& ids) {
    if (ids.shape.size() != 2 || ids.shape[1] < 1 || ids.shape[1] > config.block_size)
      shape_error("ids " + tg::to_string(ids.shape) + ", expected (B, T) with 1 <= T <= block_size " +
                  std::to_string(config.block_size));
    const int64_t T = ids.shape[1];
    Seq pos(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = t;
    tg::Tensor x = tok_emb->forward(ids) + pos_emb->forward(tg::Indices(pos, {T}));  // (B, T, C)
    x = drop->forward(x);
    const auto causal = tg::nn::AttentionForwardOptions().causal(true);
    for (const auto& b : *blocks) x = std::static_pointer_cast<tg::nn::TransformerBlock>(b)->forward(x, causal);
    return head->forward(ln_f->forward(x));
  }

  /// Cached decoding (inference): ids (B, T) are the new tokens only; their keys and values
  /// join the cache, positions continue from its length -> logits (B, T, V)
  tg::Tensor forward(const tg::Indices& ids, tg::nn::KVCache& cache) {
    tg::Tensor x = tok_emb->forward(ids) + pos_emb->forward(cache.positions(ids.shape[1]));  // (B, T, C)
    x = drop->forward(x);
    for (size_t l = 0; l < blocks->size(); ++l)
      x = blocks->at<tg::nn::TransformerBlock>(l)->forward(x, cache, static_cast<int64_t>(l));
    return head->forward(ln_f->forward(x));
  }

  Config config;
  std::shared_ptr<tg::nn::Embedding> tok_emb, pos_emb;
  std::shared_ptr<tg::nn::Dropout> drop;
  std::shared_ptr<tg::nn::ModuleList> blocks;
  std::shared_ptr<tg::nn::LayerNorm> ln_f;
  std::shared_ptr<tg::nn::Linear> head;
};

// ---- metadata: the model rebuilt from the checkpoint alone -----------------------------------

void write_metadata(const GPT& model, const Vocab& vocab, std::map<std::string, std::string>& m) {
  const Config& c = model.config;
  m["example"] = "transformer_lm";
  m["d_model"] = std::to_string(c.d_model);
  m["n_layers"] = std::to_string(c.n_layers);
  m["n_heads"] = std::to_string(c.n_heads);
  m["d_ff"] = std::to_string(c.d_ff);
  m["block_size"] = std::to_string(c.block_size);
  m["dropout"] = std::to_string(c.dropout);
  m["chars"] = vocab.chars.chars_utf8();
  std::string langs;
  for (const auto& l : vocab.languages) langs += (langs.empty() ? "" : " ") + l;
  m["languages"] = langs;
}

struct LoadedModel {
  std::shared_ptr<GPT> model;
  Vocab vocab;
};

/// Rebuilds the model and vocabulary from a checkpoint's metadata and loads the weights.
LoadedModel load_model(const tg::Checkpoint& ck, const std::string& path) {
  const ex::ExampleMetadata meta(ck.metadata, path, "transformer_lm");
  Config c;
  try {
    c.d_model = std::stoll(meta.at("d_model"));
    c.n_layers = std::stoll(meta.at("n_layers"));
    c.n_heads = std::stoll(meta.at("n_heads"));
    c.d_ff = std::stoll(meta.at("d_ff"));
    c.block_size = std::stoll(meta.at("block_size"));
    c.dropout = std::stof(meta.at("dropout"));
  } catch (const std::logic_error&) {  // stoll / stof
    throw tg::CheckpointError(path + ": malformed model configuration in the metadata");
  }
  LoadedModel m;
  m.vocab.chars = ex::CharVocab::from_utf8(meta.at("chars"));
  std::istringstream langs(meta.at("languages"));
  for (std::string l; langs >> l;) m.vocab.languages.push_back(l);
  m.model = std::make_shared<GPT>(c, m.vocab.size());
  ck.restore_model(*m.model);
  return m;
}

// ---- batches, evaluation, the baseline, sampling ---------------------------------------------

/// Inputs (B, T) drop each sequence's last token, targets (B, T) its first; past a word's end
/// inputs are <end> and targets -100 (ignored by the loss).
struct LMBatch {
  tg::Indices inputs, targets;
};

LMBatch make_batch(const std::vector<const Seq*>& seqs) {
  size_t T = 0;
  for (const Seq* s : seqs) T = std::max(T, s->size() - 1);
  Seq in(seqs.size() * T, 0), tgt(seqs.size() * T, -100);
  for (size_t b = 0; b < seqs.size(); ++b)
    for (size_t t = 0; t + 1 < seqs[b]->size(); ++t) {
      in[b * T + t] = (*seqs[b])[t];
      tgt[b * T + t] = (*seqs[b])[t + 1];
    }
  const int64_t B = static_cast<int64_t>(seqs.size()), Ti = static_cast<int64_t>(T);
  return {tg::Indices(in, {B, Ti}), tg::Indices(tgt, {B * Ti})};
}

struct Evaluation {
  double loss = 0;      // nats per character
  double accuracy = 0;  // top-1 next-character accuracy
};

/// Loss and next-character accuracy over whole sequences, in eval mode, without the tape.
Evaluation evaluate(GPT& model, const std::vector<Seq>& seqs) {
  tg::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  double nll = 0;
  int64_t count = 0, correct = 0;
  for (size_t start = 0; start < seqs.size(); start += 256) {
    std::vector<const Seq*> part;
    for (size_t i = start; i < std::min(seqs.size(), start + 256); ++i) part.push_back(&seqs[i]);
    const LMBatch b = make_batch(part);
    const tg::Tensor logits = model.forward(b.inputs);  // (B, T, V)
    const int64_t V = logits.size(2);
    const tg::Tensor flat = tg::reshape(logits, {-1, V});
    nll += tg::cross_entropy(flat, b.targets, tg::CrossEntropyOptions().reduction(tg::Reduction::Sum)).item();
    const float* l = flat.data_ptr();
    for (int64_t i = 0; i < b.targets.numel(); ++i) {
      const int64_t y = b.targets.values[static_cast<size_t>(i)];
      if (y < 0) continue;
      ++count;
      correct += std::max_element(l + i * V, l + (i + 1) * V) - (l + i * V) == y;
    }
  }
  model.train(was_training);
  return {nll / static_cast<double>(count), static_cast<double>(correct) / static_cast<double>(count)};
}

/// P(next | prev, ℓ) = (n(ℓ, prev, next) + 1) / (n(ℓ, prev) + K), counted on the training
/// words; K = n_chars + 1 possible next tokens (the characters and <end>), prev = <ℓ> at the start.
class Bigram {
 public:
  Bigram(const Vocab& v, const std::vector<Seq>& train)
      : vocab_(v), n_(static_cast<size_t>(v.size())), K_(v.n_chars() + 1) {
    counts_.assign(v.languages.size() * n_ * n_, 0.0);
    for (const Seq& s : train)
      for (size_t t = 0; t + 1 < s.size(); ++t) counts_[index(s[0], s[t], s[t + 1])] += 1;
  }
  /// Mean negative log-likelihood per predicted character (nats).
  double loss(const std::vector<Seq>& seqs) const {
    double nll = 0;
    int64_t count = 0;
    for (const Seq& s : seqs)
      for (size_t t = 0; t + 1 < s.size(); ++t) {
        double row = 0;
        for (int64_t next = 0; next < K_; ++next) row += counts_[index(s[0], s[t], next)];
        nll -= std::log((counts_[index(s[0], s[t], s[t + 1])] + 1) / (row + static_cast<double>(K_)));
        ++count;
      }
    return nll / static_cast<double>(count);
  }

 private:
  size_t index(int64_t lang_token, int64_t prev, int64_t next) const {
    const size_t lang = static_cast<size_t>(lang_token - vocab_.lang_token(0));
    return (lang * n_ + static_cast<size_t>(prev)) * n_ + static_cast<size_t>(next);
  }
  const Vocab& vocab_;
  size_t n_;
  int64_t K_;
  std::vector<double> counts_;
};

struct Sample {
  std::string lang, word;
};

/// Draws n words autoregressively (softmax at `temperature` over <end> and the characters),
/// in language `lang` (an index) or, if lang < 0, each in a random one, through tg::nn::generate:
/// with a KV cache (each step feeds one new character), or, with use_cache false, recomputing
/// the whole prefix at every step. Uses a generator of its own seeded with `seed`: the same
/// weights and seed give the same words.
std::vector<Sample> sample_words(GPT& model, const Vocab& vocab, int64_t n, int64_t lang, double temperature,
                                 uint64_t seed, bool use_cache = true) {
  const bool was_training = model.is_training();
  model.eval();
  tg::Generator gen(seed);
  std::vector<tg::nn::TokenIds> prompts(static_cast<size_t>(n));
  for (auto& p : prompts)
    p.push_back(vocab.lang_token(lang >= 0 ? lang : static_cast<int64_t>(gen.below(vocab.languages.size()))));
  const int64_t K = vocab.n_chars() + 1;  // only <end> and characters are drawn
  tg::nn::KVCache cache(model.config.n_layers, n, model.config.block_size);
  const tg::nn::DecodeFn decoder = [&](const tg::nn::DecodeInput& in) {
    const tg::Tensor logits = in.cache ? model.forward(in.ids, *in.cache) : model.forward(in.ids);  // (n, T, V)
    return tg::narrow(tg::select(logits, 1, -1), 1, 0, K);                                         // (n, K)
  };
  const auto options = tg::nn::GenerateOptions()
                           .max_new_tokens(model.config.block_size - 1)
                           .sampling(tg::nn::SamplingOptions().do_sample(true).temperature(static_cast<float>(temperature)))
                           .eos_token_id(0)  // <end>
                           .use_cache(use_cache);
  const auto words = tg::nn::generate(decoder, prompts, options, &cache, &gen);
  model.train(was_training);
  std::vector<Sample> out;
  for (size_t i = 0; i < words.size(); ++i) {
    Seq s = prompts[i];
    s.insert(s.end(), words[i].begin(), words[i].end());
    out.push_back({vocab.languages[static_cast<size_t>(s[0] - vocab.lang_token(0))], vocab.decode(s)});
  }
  return out;
}

// ---- the program -------------------------------------------------------------------------------

struct Args {
  ex::RunOptions run;
  ex::StepOptions loop;  // --steps --eval-every --log-every --stop-after
  Config model;
  int64_t batch = 64;
  int64_t warmup = 100;
  double weight_decay = 0.01;
  int64_t limit = 0;
  bool resume = false;
  bool distributed = false;
  int64_t sample = 0;
  std::string lang;
  double temperature = 1.0;
  bool no_cache = false;
};

void print_samples(const std::vector<Sample>& samples, const std::set<std::string>& known) {
  for (const Sample& s : samples)
    std::printf("%s  %s%s\n", s.lang.c_str(), s.word.c_str(), known.count(s.lang + "\t" + s.word) ? "  (in the data)" : "");
}

/// Every "lang<TAB>word" of the data set, to mark samples that are not new.
std::set<std::string> known_words(const ex::WordsData& d) {
  std::set<std::string> out;
  for (const ex::LabeledWords* split : {&d.train, &d.val, &d.test})
    for (int64_t i = 0; i < split->size(); ++i)
      out.insert(d.languages[static_cast<size_t>(split->labels[static_cast<size_t>(i)])] + "\t" +
                 ex::utf8_encode(split->words[static_cast<size_t>(i)]));
  return out;
}

int run_sample(const Args& a) {
  const tg::Checkpoint ck = tg::Checkpoint::load(a.run.checkpoint);
  LoadedModel m = load_model(ck, a.run.checkpoint);
  const int64_t lang = a.lang.empty() ? -1 : m.vocab.lang_index(a.lang);
  std::printf("%s: step %lld, %lld parameters; seed %llu, temperature %g\n", a.run.checkpoint.c_str(),
              static_cast<long long>(ck.step), static_cast<long long>(m.model->num_parameters()),
              static_cast<unsigned long long>(a.run.seed), a.temperature);
  std::set<std::string> known;
  try {  // marking words that are in the data set is a nicety: the checkpoint alone suffices
    known = known_words(ex::load_words(a.run.data));
  } catch (const tg::Error&) {
  }
  const auto start = std::chrono::steady_clock::now();
  const auto samples = sample_words(*m.model, m.vocab, a.sample, lang, a.temperature, a.run.seed, !a.no_cache);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print_samples(samples, known);
  std::printf("%lld words in %.1f ms (%s)\n", static_cast<long long>(a.sample), 1e3 * seconds,
              a.no_cache ? "recomputing every prefix: --no-cache" : "KV cache");
  return 0;
}

int run_train(const Args& a) {
  ex::Parallel par(a.distributed);  // --distributed: MPI; only rank 0 prints
  const ex::Stopwatch watch;
  const ex::WordsData data = ex::load_words(a.run.data, a.limit);

  std::shared_ptr<GPT> model;
  Vocab vocab;
  tg::Checkpoint resumed;
  if (a.resume) {  // the model's shape and vocabulary come from the checkpoint
    resumed = par.load(a.run.checkpoint);  // with --distributed, rank 0 reads it for all
    LoadedModel m = load_model(resumed, a.run.checkpoint);
    model = m.model;
    vocab = m.vocab;
    if (vocab.languages != data.languages)
      throw tg::ValueError("--resume: " + a.run.checkpoint + " was trained on other languages than " + a.run.data);
  } else {
    std::vector<std::u32string> all = data.train.words;  // the alphabet of every split (with
    all.insert(all.end(), data.val.words.begin(), data.val.words.end());  // --limit, train alone
    all.insert(all.end(), data.test.words.begin(), data.test.words.end());  // may miss some)
    vocab.chars = ex::CharVocab(all);
    vocab.languages = data.languages;
    Config c = a.model;
    for (const auto& w : data.train.words) c.block_size = std::max<int64_t>(c.block_size, static_cast<int64_t>(w.size()) + 1);
    model = std::make_shared<GPT>(c, vocab.size());
  }
  auto encode = [&](const ex::LabeledWords& split) {
    std::vector<Seq> out;
    for (int64_t i = 0; i < split.size(); ++i) {
      out.push_back(vocab.encode(split.words[static_cast<size_t>(i)], split.labels[static_cast<size_t>(i)]));
      if (static_cast<int64_t>(out.back().size()) - 1 > model->config.block_size)
        throw tg::ValueError("'" + ex::utf8_encode(split.words[static_cast<size_t>(i)]) + "' is longer than the model's block_size " +
                             std::to_string(model->config.block_size) + " allows");
    }
    return out;
  };
  par.wrap(model);  // rank 0's initial weights everywhere
  const std::vector<Seq> train = encode(data.train), val = encode(data.val);
  const int64_t lang = a.lang.empty() ? -1 : vocab.lang_index(a.lang);  // for the samples at the end
  const Bigram bigram(vocab, train);
  const double bigram_val = bigram.loss(val);

  const Config& c = model->config;
  std::printf("data: %s: %lld train / %lld val words, %lld characters, %zu languages\n", a.run.data.c_str(),
              static_cast<long long>(train.size()), static_cast<long long>(val.size()),
              static_cast<long long>(vocab.n_chars()), vocab.languages.size());
  std::printf("model: %lld parameters: d_model %lld, %lld layers, %lld heads, d_ff %lld, block %lld, dropout %g; %s\n",
              static_cast<long long>(model->num_parameters()), static_cast<long long>(c.d_model),
              static_cast<long long>(c.n_layers), static_cast<long long>(c.n_heads), static_cast<long long>(c.d_ff),
              static_cast<long long>(c.block_size), c.dropout, tg::device_status().c_str());
  std::printf("bigram baseline (per language, add-one): val loss %.4f nats/char\n\n", bigram_val);

  tg::optim::AdamW opt(model->parameters(), tg::optim::AdamWOptions(a.run.lr).weight_decay(a.weight_decay));
  tg::optim::WarmupCosineLR sched(opt, std::min(a.warmup, a.loop.steps / 10), a.loop.steps, 0.1);
  // Sharded (--distributed), every rank must draw the same order: a seeded shuffle.
  auto sampling = tg::data::DataLoaderOptions(a.batch).shuffle(true).drop_last(true);
  if (par.on()) sampling.seed(a.run.seed);
  tg::data::BatchSampler sampler(static_cast<int64_t>(train.size()), par.shard(sampling));
  if (sampler.num_batches() == 0)
    throw tg::ValueError("--batch " + std::to_string(a.batch) + " is larger than the " +
                         std::to_string(train.size()) + " training words");
  ex::LossLog log;
  int64_t step = 0;
  if (a.resume) {
    ex::check_same_schedule(resumed, a.run.checkpoint, a.loop.steps, a.run.lr);
    resumed.restore(*model, {{"optimizer", opt}, {"scheduler", sched}, {"data", sampler}, {"log", log}});
    if (par.on()) par.load_rng_state_dict(resumed.get("rngs"));  // each rank's own dropout stream
    step = resumed.step;
    std::printf("resumed %s at step %lld\n", a.run.checkpoint.c_str(), static_cast<long long>(step));
  }
  if (par.on())
    std::printf("distributed: %d ranks, each on 1/%d of the words at batch %lld (global batch %lld)\n",
                par.world_size(), par.world_size(), static_cast<long long>(a.batch),
                static_cast<long long>(a.batch * par.world_size()));

  std::optional<ex::CsvLog> csv;  // rank 0's
  if (par.is_main()) {
    ex::make_parent_dirs(a.run.checkpoint);
    csv.emplace(ex::sibling_path(a.run.checkpoint, ".csv"), a.resume ? step : -1);
  }
  ex::StepLoop loop{a.loop, opt, sched, model->parameters(), log};
  loop.csv = csv ? &*csv : nullptr;
  loop.loss_label = "train loss";
  loop.loss = [&] {
    if (!sampler.in_epoch()) sampler.begin_epoch();
    std::vector<const Seq*> part;
    for (const int64_t i : sampler.next()) part.push_back(&train[static_cast<size_t>(i)]);
    const LMBatch b = make_batch(part);
    const tg::Tensor logits = model->forward(b.inputs);  // (B, T, V)
    return tg::cross_entropy(tg::reshape(logits, {-1, logits.size(2)}), b.targets);
  };
  loop.sync_gradients = [&] { par.sync_gradients(); };  // --distributed: the mean over the ranks
  loop.end_window = [&](double train_loss) {
    const Evaluation v = par.is_main() ? evaluate(*model, val) : Evaluation();
    char summary[192];
    std::snprintf(summary, sizeof summary, "train loss %.4f  val loss %.4f  val acc %5.1f%%  lr %.2e  %4.0f s",
                  train_loss, v.loss, 100 * v.accuracy, log.lr, watch.seconds());
    return ex::StepLoop::WindowEnd{v.accuracy, summary};
  };
  loop.save = [&](int64_t at) {  // the RNG too (dropout; the shuffles are in the sampler's state)
    tg::Checkpoint ck =
        ex::snapshot(*model, {{"optimizer", opt}, {"scheduler", sched}, {"data", sampler}, {"log", log}}, at);
    if (par.on()) ck.set("rngs", par.rng_state_dict());
    write_metadata(*model, vocab, ck.metadata);
    par.save(ck, a.run.checkpoint);  // with --distributed rank 0 writes, all ranks wait
  };
  model->train();
  if (!loop.run(step)) return 0;  // --stop-after
  if (!par.is_main()) return 0;  // the final evaluation, reload and samples: rank 0's

  const Evaluation tr = evaluate(*model, train), v = evaluate(*model, val);
  const double seconds = watch.seconds();
  std::printf("\nafter %lld steps (%.1f s), per character:\n", static_cast<long long>(step), seconds);
  std::printf("  transformer      train loss %.4f  val loss %.4f nats  (val next-char accuracy %.1f%%)\n", tr.loss,
              v.loss, 100 * v.accuracy);
  std::printf("  bigram baseline  train loss %.4f  val loss %.4f nats\n", bigram.loss(train), bigram_val);

  // Reload the checkpoint into a fresh model: the same validation loss and the same samples.
  const tg::Checkpoint ck = tg::Checkpoint::load(a.run.checkpoint);
  LoadedModel reloaded = load_model(ck, a.run.checkpoint);
  const Evaluation again = evaluate(*reloaded.model, val);
  const auto samples = sample_words(*model, vocab, 10, lang, a.temperature, a.run.seed);
  const auto samples_again = sample_words(*reloaded.model, reloaded.vocab, 10, lang, a.temperature, a.run.seed);
  bool same = again.loss == v.loss;
  for (size_t i = 0; i < samples.size(); ++i) same = same && samples[i].word == samples_again[i].word;
  std::printf("reloaded %s: val loss %.4f, samples %s\n", a.run.checkpoint.c_str(), again.loss,
              same ? "identical" : "DIFFERENT");
  if (!same) throw tg::CheckpointError("the reloaded model differs from the trained one");
  // The same words recomputing every prefix (--no-cache): a KV cache changes no token unless
  // two choices are within float rounding of each other.
  const auto recomputed = sample_words(*model, vocab, 10, lang, a.temperature, a.run.seed, /*use_cache=*/false);
  bool cache_same = true;
  for (size_t i = 0; i < samples.size(); ++i) cache_same = cache_same && samples[i].word == recomputed[i].word;
  std::printf("samples through the KV cache and recomputed without it: %s\n", cache_same ? "identical" : "DIFFERENT");
  std::printf("\nsamples from the reloaded model (--sample 10 --seed %llu):\n",
              static_cast<unsigned long long>(a.run.seed));
  print_samples(samples_again, known_words(data));

  const std::string png = ex::sibling_path(a.run.checkpoint, ".png");
  ex::plot_loss_curve(csv->path(), png, "transformer_lm", "validation next-character accuracy");
  std::printf("\ncheckpoint %s, curve %s and %s\n", a.run.checkpoint.c_str(), csv->path().c_str(), png.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"transformer_lm: a small GPT writes new words of a language, character by character"};
  app.name("transformer_lm");
  Args a;
  a.run.lr = 3e-3;
  a.run.seed = 1;
  a.run.checkpoint = "checkpoints/transformer_lm.ckpt";
  a.loop.steps = 3000;
  a.run.data = ex::words_dir();
  ex::add_run_options(app, a.run, "words dataset directory (languages.txt, train/val/test.tsv)");
  app.add_option("--steps", a.loop.steps, "optimizer steps in all (AdamW, warmup + cosine to lr/10)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000000}))->capture_default_str();
  app.add_option("--batch", a.batch, "words per batch (per rank with --distributed)")->check(CLI::Range(int64_t{1}, int64_t{1000000000}))->capture_default_str();
  app.add_option("--eval-every", a.loop.eval_every, "steps between validation passes and checkpoints")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000000}))->capture_default_str();
  app.add_option("--log-every", a.loop.log_every, "steps between CSV rows")->check(CLI::Range(int64_t{1}, int64_t{1000000000}))->capture_default_str();
  app.add_option("--limit", a.limit, "use only the first N words of each split (0: all)")
      ->check(ex::kFiniteNonNegative)->capture_default_str();
  ex::add_transformer_options(app, a.model.d_model, a.model.n_layers, a.model.n_heads, a.model.d_ff);
  app.add_option("--dropout", a.model.dropout, "dropout rate")->check(ex::kFiniteNonNegative)->check(CLI::Range(0.0, 0.9))->capture_default_str();
  auto* resume = app.add_flag("--resume", a.resume,
                              "continue the run saved in --checkpoint (same --steps, --lr, --batch, --limit)");
  app.add_option("--stop-after", a.loop.stop_after, "stop after step N and save the checkpoint, as if interrupted")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000000}));
  auto* distributed = app.add_flag("--distributed", a.distributed,
                                   "data parallel over MPI: run as mpirun -np N transformer_lm --distributed");
  app.add_option("--sample", a.sample, "load --checkpoint, print N new words and exit")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000000}))->excludes(resume)->excludes(distributed);
  app.add_option("--lang", a.lang, "language of the sampled words (default: a random one for each)");
  app.add_option("--temperature", a.temperature, "sampling temperature")->check(ex::kFinitePositive)->check(CLI::Range(0.05, 10.0))
      ->capture_default_str();
  app.add_flag("--no-cache", a.no_cache, "with --sample: recompute the whole prefix for every character instead of a KV cache");
  return ex::run_main(app, argc, argv, [&] {
    ex::apply_run_options(a.run);
    return a.sample > 0 ? run_sample(a) : run_train(a);
  });
}
