// Greedy generation through tapegrad, with and without the KV cache (issue 17).
// bench/generate_bench.py is the PyTorch 1.13 twin (its own key/value tensors, grown with
// torch.cat as people write it by hand); bench/run_generate.sh runs both, interleaved, and
// prints the table.
//
//   generate_bench <cache|nocache|memory> [--batch B] [--new N] [--prompt P] [--reps R]
//                  [--warmup W] [--tiny]
//
// The decoder: vocab 256, d_model 192, 6 heads, 4 pre-LN blocks, d_ff 768 (GELU), learned
// positions up to 512, final LayerNorm, Linear head; random weights (seed 0), eval mode. The
// prompt is P = 16 fixed random tokens per row (B rows); N new tokens are chosen greedily
// (no eos, so every run makes exactly B·N tokens). One thread (tg::set_num_threads(1)).
// --tiny shrinks the model (d_model 32, 2 heads, 2 blocks, d_ff 64) to check that it runs.
//
//   cache    tg::nn::generate with a KVCache of max_length P + N: the prompt in one step, then
//            one token per step
//   nocache  the same loop recomputing the whole sequence at every step (use_cache = false)
//   memory   one cached generation after a warm-up one; peak live bytes (tapegrad's counter)
//
// Output, one "key value" per line: blas_core, tokens_per_s (B·N new tokens / best wall time
// of R generations), ms_per_generation (best), ms_median, checksum (the sum of the first
// row's tokens); memory: before (weights and prompt: live when generation starts), peak
// (the most live during it, cache included), cache_bytes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.h>

namespace nn = tg::nn;
using tg::Tensor;

namespace {

struct ModelShape {
  int64_t V = 256, C = 192, H = 6, L = 4, F = 768, max_pos = 512;
};

/// Token + learned position embeddings, L pre-LN causal blocks, ln_f, head.
/// Legend: B = batch, T = positions, C = d_model, V = vocabulary.
class Decoder : public nn::Module {
 public:
  explicit Decoder(const ModelShape& s) : Module("Decoder") {
    tok_emb = register_module("tok_emb", std::make_shared<nn::Embedding>(s.V, s.C));
    pos_emb = register_module("pos_emb", std::make_shared<nn::Embedding>(s.max_pos, s.C));
    auto list = register_module("blocks", std::make_shared<nn::ModuleList>());
    for (int64_t l = 0; l < s.L; ++l)
      blocks.push_back(list->push_back(std::make_shared<nn::TransformerBlock>(nn::TransformerBlockOptions(s.C, s.H, s.F))));
    ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(s.C));
    head = register_module("head", std::make_shared<nn::Linear>(s.C, s.V));
  }

  /// The decoder step of nn::generate: (B, T) ids -> (B, T, V) logits, cached or not.
  Tensor step(const nn::DecodeInput& in) {
    Tensor x = tok_emb->forward(in.ids) + pos_emb->forward(in.positions);  // (B, T, C)
    if (in.cache) {
      for (size_t l = 0; l < blocks.size(); ++l) x = blocks[l]->forward(x, *in.cache, static_cast<int64_t>(l));
    } else {
      auto o = nn::AttentionForwardOptions().causal(true);
      if (in.key_padding_mask.defined()) o.key_padding_mask(tg::AttnMask::boolean(in.key_padding_mask));
      for (const auto& b : blocks) x = b->forward(x, o);
    }
    return head->forward(ln_f->forward(select(x, 1, -1)));  // (B, V): only the last position
  }

  std::shared_ptr<nn::Embedding> tok_emb, pos_emb;
  std::vector<std::shared_ptr<nn::TransformerBlock>> blocks;
  std::shared_ptr<nn::LayerNorm> ln_f;
  std::shared_ptr<nn::Linear> head;
};

struct Args {
  std::string mode;
  int64_t batch = 1, new_tokens = 64, prompt = 16, reps = 5, warmup = 1;
  bool tiny = false;
};

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s <cache|nocache|memory> [--batch B] [--new N] [--prompt P] [--reps R] [--warmup W] [--tiny]\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(argv[0]);
  Args a;
  a.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--tiny") {
      a.tiny = true;
      continue;
    }
    if (i + 1 >= argc) return usage(argv[0]);
    const int64_t v = std::atoll(argv[++i]);
    if (k == "--batch") a.batch = v;
    else if (k == "--new") a.new_tokens = v;
    else if (k == "--prompt") a.prompt = v;
    else if (k == "--reps") a.reps = v;
    else if (k == "--warmup") a.warmup = v;
    else return usage(argv[0]);
  }
  if (a.mode != "cache" && a.mode != "nocache" && a.mode != "memory") return usage(argv[0]);
  tg::set_num_threads(1);
  ModelShape s;
  if (a.tiny) s = ModelShape{256, 32, 2, 2, 64, 512};
  tg::manual_seed(0);
  Decoder model(s);
  model.eval();
  std::vector<nn::TokenIds> prompts(static_cast<size_t>(a.batch));
  tg::Generator ids(1);
  for (auto& p : prompts)
    for (int64_t t = 0; t < a.prompt; ++t) p.push_back(static_cast<int64_t>(ids.below(static_cast<uint64_t>(s.V))));
  nn::KVCache cache(s.L, a.batch, a.prompt + a.new_tokens);
  const nn::DecodeFn decoder = [&](const nn::DecodeInput& in) { return model.step(in); };
  const auto options = nn::GenerateOptions().max_new_tokens(a.new_tokens).use_cache(a.mode != "nocache");
  std::printf("blas_core %s\n", tg::blas_kernel().c_str());

  if (a.mode == "memory") {
    nn::generate(decoder, prompts, options, &cache);  // warm-up: the cache buffers exist now
    tg::reset_peak_memory_stats();
    const int64_t before = tg::memory_stats().live_bytes;
    nn::generate(decoder, prompts, options, &cache);
    std::printf("before %lld\npeak %lld\ncache_bytes %lld\n", static_cast<long long>(before),
                static_cast<long long>(tg::memory_stats().peak_bytes), static_cast<long long>(cache.nbytes()));
    return 0;
  }
  std::vector<double> ms;
  int64_t checksum = 0;
  for (int64_t r = 0; r < a.warmup + a.reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto out = nn::generate(decoder, prompts, options, &cache);
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r >= a.warmup) ms.push_back(t);
    checksum = 0;
    for (const int64_t tok : out[0]) checksum += tok;
  }
  std::sort(ms.begin(), ms.end());
  std::printf("tokens_per_s %.1f\nms_per_generation %.3f\nms_median %.3f\nchecksum %lld\n",
              1e3 * static_cast<double>(a.batch * a.new_tokens) / ms.front(), ms.front(), ms[(ms.size() - 1) / 2],
              static_cast<long long>(checksum));
  return 0;
}
