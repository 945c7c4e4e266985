// tutorial_rnn: PyTorch's "Classifying names with a character-level RNN" tutorial, written the
// way a LibTorch user would write it with tapegrad. One word at a time, one character per step:
//
//   hidden = tanh(i2h(x_t) + h2h(hidden))      x_t: one-hot character (1, V), hidden (1, H)
//   output = log_softmax(h2o(hidden))          after the last character: (1, K)
//
// It trains with plain SGD on random training words and checks that the loss on 300
// validation words falls (exit code 1 if it does not). char_rnn_classify.cpp is the long
// version (batches, LSTM/GRU, checkpoints). Usage: tutorial_rnn [steps] [hidden].
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/cli.h"    // ex::words_dir()
#include "common/words.h"  // the shipped words-by-language dataset
#include "tapegrad/tapegrad.h"

namespace nn = tg::nn;

struct RNN : nn::Module {
  RNN(int64_t input_size, int64_t hidden_size, int64_t output_size)
      : Module("RNN"), hidden_size(hidden_size) {
    i2h = register_module("i2h", std::make_shared<nn::Linear>(input_size, hidden_size));
    h2h = register_module("h2h", std::make_shared<nn::Linear>(hidden_size, hidden_size));
    h2o = register_module("h2o", std::make_shared<nn::Linear>(hidden_size, output_size));
    softmax = register_module("softmax", std::make_shared<nn::LogSoftmax>(1));
  }
  /// One step: x (1, V), hidden (1, H) -> (log-probabilities (1, K), new hidden (1, H)).
  std::pair<tg::Tensor, tg::Tensor> forward(const tg::Tensor& x, const tg::Tensor& hidden) {
    const tg::Tensor h = tg::tanh(i2h(x) + h2h(hidden));
    return {softmax(h2o(h)), h};
  }
  tg::Tensor init_hidden() const { return tg::zeros({1, hidden_size}); }

  int64_t hidden_size;
  nn::ModuleHolder<nn::Linear> i2h, h2h, h2o;
  nn::ModuleHolder<nn::LogSoftmax> softmax;
};

/// A word as one-hot characters: (T, 1, V), as the tutorial's lineToTensor.
tg::Tensor word_to_tensor(const ex::CharVocab& vocab, const std::u32string& word) {
  const auto T = static_cast<int64_t>(word.size());
  const tg::Tensor chars = tg::tensor(vocab.encode(word), {T});  // int64 (T)
  return tg::one_hot(chars, vocab.size()).to(tg::kFloat32).view({T, 1, vocab.size()});
}

/// Runs the RNN over a word: the log-probabilities after its last character (1, K).
tg::Tensor classify(RNN& rnn, const tg::Tensor& word) {
  tg::Tensor output, hidden = rnn.init_hidden();
  for (int64_t t = 0; t < word.size(0); ++t) std::tie(output, hidden) = rnn.forward(word[t], hidden);
  return output;
}

/// Mean loss and accuracy (%) over a split, without recording.
std::pair<float, float> evaluate(RNN& rnn, const ex::CharVocab& vocab, const ex::LabeledWords& split) {
  tg::NoGradGuard no_grad;
  double loss = 0, correct = 0;
  for (int64_t i = 0; i < split.size(); ++i) {
    const tg::Tensor output = classify(rnn, word_to_tensor(vocab, split.words[i]));
    const tg::Tensor target = tg::tensor(std::vector<int64_t>{split.labels[i]}, {1});  // int64 (1)
    loss += tg::nll_loss(output, target).item();
    correct += output.argmax(1).item<int64_t>() == split.labels[i];
  }
  return {static_cast<float>(loss / split.size()), static_cast<float>(100 * correct / split.size())};
}

int main(int argc, char** argv) {
  const int64_t steps = argc > 1 ? std::atoll(argv[1]) : 20000;
  const int64_t hidden_size = argc > 2 ? std::atoll(argv[2]) : 128;
  if (argc > 3 || steps < 1 || hidden_size < 1) {
    std::fprintf(stderr, "usage: tutorial_rnn [steps >= 1] [hidden size >= 1]\n");
    return 2;
  }
  tg::manual_seed(0);
  tg::set_num_threads(1);  // (1, H) products: one thread is fastest
  ex::WordsData data = ex::load_words(ex::words_dir());
  const size_t n_val = std::min<size_t>(300, data.val.words.size());  // a quick validation set
  data.val.words.resize(n_val);
  data.val.labels.resize(n_val);
  const ex::CharVocab vocab(data.train.words);
  const auto n_languages = static_cast<int64_t>(data.languages.size());

  auto rnn = std::make_shared<RNN>(vocab.size(), hidden_size, n_languages);
  auto params = rnn->named_parameters();
  std::printf("%zu parameter tensors; i2h.weight %s, h2o.weight %s\n", params.size(),
              tg::to_string(params["i2h.weight"].sizes()).c_str(),
              tg::to_string(params["h2o.weight"].sizes()).c_str());
  tg::optim::SGD optimizer(rnn->parameters(), /*lr=*/0.01);

  const auto [loss_before, accuracy_before] = evaluate(*rnn, vocab, data.val);
  std::printf("before: validation loss %.4f, accuracy %.1f%%\n", loss_before, accuracy_before);
  const int64_t report_every = steps >= 5 ? steps / 5 : 1;
  double running = 0;
  for (int64_t step = 1; step <= steps; ++step) {
    const int64_t i = tg::randint(0, data.train.size(), {1}).item<int64_t>();  // a random word
    const tg::Tensor word = word_to_tensor(vocab, data.train.words[i]);
    const tg::Tensor target = tg::tensor(std::vector<int64_t>{data.train.labels[i]}, {1});
    const tg::Tensor loss = optimizer.step([&] {
      optimizer.zero_grad();
      tg::Tensor l = tg::nll_loss(classify(*rnn, word), target);
      l.backward();
      return l;
    });
    running += loss.item();
    if (step % report_every == 0) {
      std::printf("step %lld: mean training loss %.4f\n", static_cast<long long>(step),
                  running / report_every);
      running = 0;
    }
  }
  const auto [loss_after, accuracy_after] = evaluate(*rnn, vocab, data.val);
  std::printf("after:  validation loss %.4f, accuracy %.1f%%\n", loss_after, accuracy_after);

  for (const char* name : {"albert", "schmidt", "dubois", "kowalski"}) {
    const tg::Tensor output = classify(*rnn, word_to_tensor(vocab, ex::utf8_decode(name)));
    std::printf("  %-9s -> %s\n", name, data.languages[output.argmax(1).item<int64_t>()].c_str());
  }
  if (!(loss_after < loss_before)) {
    std::printf("the validation loss did not fall\n");
    return 1;
  }
  std::printf("the validation loss fell: %.4f -> %.4f\n", loss_before, loss_after);
  return 0;
}
