// Memory over long runs: a 10,000-step training loop (embedding, LSTM, linear head,
// cross-entropy, clipping, Adam, a scheduler, a data loader and an in-memory checkpoint round
// trip every 1,000 steps) must keep a flat RSS and a flat heap.
//
// Tolerances, measured from step 1,000 (after warm-up: every buffer size has been seen) to
// step 10,000: RSS may grow by at most 2 MiB, the bytes malloc has handed out and not taken
// back (glibc mallinfo2) by at most 256 KiB. A leak of one small tensor per step (64 floats)
// would add 2.3 MiB by then, so both checks would catch it.
//
// Under AddressSanitizer the RSS is governed by its quarantine and shadow memory, not by the
// program: there the loop runs 300 steps and LeakSanitizer (at exit) is the check.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "tapegrad/tapegrad.h"

#if defined(__SANITIZE_ADDRESS__)
#define TG_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TG_UNDER_ASAN 1
#endif
#endif

using namespace tg;

namespace {

int64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

int64_t heap_in_use() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
#else
  return 0;
#endif
}

/// ids (B, T) -> class logits (B, K): embedding, LSTM, the last step's hidden state, a head.
struct CharClassifier : nn::Module {
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<nn::LSTM> lstm;
  std::shared_ptr<nn::Linear> head;
  CharClassifier() : Module("CharClassifier") {
    emb = register_module("emb", std::make_shared<nn::Embedding>(20, 8));
    lstm = register_module("lstm", std::make_shared<nn::LSTM>(nn::LSTMOptions(8, 16).batch_first(true)));
    head = register_module("head", std::make_shared<nn::Linear>(16, 5));
  }
  Tensor forward(const Indices& ids) {
    Tensor h = lstm->forward(emb->forward(ids)).output;  // (B, T, H)
    return head->forward(squeeze(narrow(h, 1, h.size(1) - 1, 1), 1));
  }
};

struct Sample {
  int64_t step;
  int64_t rss, heap;
};

}  // namespace

TEST(Leaks, LongTrainingLoopKeepsAFlatRssAndHeap) {
#ifdef TG_UNDER_ASAN
  const int steps = 300, warmup = 100, every = 50;
#else
  int steps = 10000, warmup = 1000, every = 250;
  if (const char* s = std::getenv("TG_LEAKS_STEPS")) steps = std::atoi(s);  // longer runs, by hand
#endif
  manual_seed(11);
  auto model = std::make_shared<CharClassifier>();
  optim::Adam opt(model->parameters(), optim::AdamOptions(3e-3));
  optim::CosineAnnealingLR sched(opt, 500);

  // 64 sequences of 10 ids with a learnable label (the first id mod 5).
  const int64_t N = 64, T = 10, B = 8;
  std::vector<std::vector<int64_t>> seqs;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < N; ++i) {
    std::vector<int64_t> s;
    for (int64_t t = 0; t < T; ++t) s.push_back(static_cast<int64_t>(default_generator().below(20)));
    labels.push_back(s[0] % 5);
    seqs.push_back(std::move(s));
  }
  data::DataLoader<data::SequenceDataset> loader(data::SequenceDataset(seqs, labels),
                                                 data::DataLoaderOptions(B).shuffle(true).seed(3));

  std::vector<Sample> samples;
  float first_loss = 0, last_loss = 0;
  int step = 0;
  while (step < steps) {
    for (const auto& batch : loader) {
      if (step == steps) break;
      opt.zero_grad();
      Tensor loss = cross_entropy(model->forward(batch.ids), batch.labels);
      loss.backward();
      nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      opt.step();
      sched.step();
      (step == 0 ? first_loss : last_loss) = loss.item();
      ++step;
      if (step % 1000 == 0 || step == steps) {
        // A checkpoint round trip in memory, restored into the running model and optimizer.
        Checkpoint ck;
        ck.set_model(*model);
        ck.set("optimizer", opt.state_dict());
        ck.set("scheduler", sched.state_dict());
        ck.set("data", loader.state_dict());
        Checkpoint back = Checkpoint::deserialize(ck.serialize());
        back.restore(*model, {{"optimizer", opt}, {"scheduler", sched}, {"data", loader}}, false);
      }
      if (step % every == 0) samples.push_back({step, rss_bytes(), heap_in_use()});
    }
  }
  EXPECT_LT(last_loss, first_loss);  // it trained

  const Sample* base = nullptr;
  for (const auto& s : samples)
    if (s.step == warmup) base = &s;
  ASSERT_NE(base, nullptr);
  int64_t max_rss = 0, max_heap = 0;
  for (const auto& s : samples) {
    if (s.step < warmup) continue;
    max_rss = std::max(max_rss, s.rss - base->rss);
    max_heap = std::max(max_heap, s.heap - base->heap);
  }
  if (std::getenv("TG_LEAKS_VERBOSE"))
    for (const auto& s : samples)
      std::printf("  step %6lld  RSS %+9lld  heap %+9lld\n", static_cast<long long>(s.step),
                  static_cast<long long>(s.rss - base->rss), static_cast<long long>(s.heap - base->heap));
  const Sample& end = samples.back();
  std::printf("[leaks] %d steps: RSS %.1f MiB at step %lld, %.1f MiB at the end (max growth %+.3f MiB); "
              "heap in use %+lld bytes (max %+lld)\n",
              steps, base->rss / 1048576.0, static_cast<long long>(base->step), end.rss / 1048576.0,
              max_rss / 1048576.0, static_cast<long long>(end.heap - base->heap),
              static_cast<long long>(max_heap));
#ifdef TG_UNDER_ASAN
  std::printf("[leaks] AddressSanitizer build: RSS not checked; LeakSanitizer checks at exit\n");
#else
  EXPECT_LE(max_rss, 2 << 20) << "RSS grew by " << max_rss << " bytes after warm-up";
#if defined(__GLIBC__)
  EXPECT_LE(max_heap, 256 << 10) << "the heap grew by " << max_heap << " bytes after warm-up";
#endif
#endif
}

TEST(Leaks, GraphsThatAreNeverReplayedAreFreed) {
  // Forward passes whose graphs are dropped without backward (evaluation with grad on, an
  // exception before backward): the nodes and saved values must go with the last handle.
  manual_seed(12);
  nn::TransformerBlock block(nn::TransformerBlockOptions(16, 2, 32));
  const Tensor x = randn({2, 6, 16});
  auto run = [&](int n) {
    for (int i = 0; i < n; ++i) {
      Tensor y = block.forward(x, nn::AttentionForwardOptions().causal(true));
      if (i % 2) sum(y).backward();  // half of them replayed, half dropped
    }
  };
  run(50);  // warm-up
  const int64_t heap0 = heap_in_use();
  run(400);
  const int64_t grown = heap_in_use() - heap0;
  std::printf("[leaks] 400 dropped/replayed transformer graphs: heap %+lld bytes\n",
              static_cast<long long>(grown));
#if !defined(TG_UNDER_ASAN) && defined(__GLIBC__)
  EXPECT_LE(grown, 64 << 10);
#endif
}
