// Logits processors, the next-token choice and the generate loop (tapegrad/nn/generation.h).
// The processors work on each row's float values directly: they are not differentiable, and a
// row of V floats is cheaper to walk than a chain of ops.
//
// Legend: B = batch, T = positions, V = vocabulary, P = prompt length after left padding.
#include "tapegrad/nn/generation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tapegrad/autograd.h"
#include "tapegrad/error.h"
#include "tapegrad/ops.h"

namespace tg {
namespace nn {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::string str(int64_t n) { return std::to_string(n); }

/// The values of logits (B, V), checked, as a flat row-major vector.
std::vector<float> rows_of(const Tensor& logits, const char* op, int64_t& B, int64_t& V) {
  if (!logits.defined()) throw ValueError(std::string(op) + ": logits are undefined");
  if (logits.dim() != 2 || logits.size(1) == 0)
    throw ShapeError(std::string(op) + ": logits must be (B, V) with V >= 1, got " + to_string(logits.shape()));
  B = logits.size(0);
  V = logits.size(1);
  return logits.to_vector();
}

// seen tokens: x / penalty if x > 0, x · penalty otherwise (each distinct token once)
void penalize_row(float* row, int64_t V, const TokenIds& seen, float penalty, const char* op) {
  std::vector<int64_t> ids = seen;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (const int64_t id : ids) {
    if (id < 0 || id >= V)
      throw IndexError(std::string(op) + ": token " + str(id) + " is out of range for a vocabulary of " + str(V));
    float& x = row[id];
    x = x > 0.0f ? x / penalty : x * penalty;
  }
}

// HF's TopKLogitsWarper: remove x < (k-th largest)
void top_k_row(float* row, int64_t V, int64_t k) {
  if (k >= V) return;
  std::vector<float> sorted(row, row + V);
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<float>());
  const float kth = sorted[static_cast<size_t>(k - 1)];
  for (int64_t j = 0; j < V; ++j)
    if (row[j] < kth) row[j] = kNegInf;
}

// HF's TopPLogitsWarper: sort ascending, remove the tokens whose cumulative probability is
// <= 1 - p, always keeping the min_keep most likely.
void top_p_row(float* row, int64_t V, float p, int64_t min_keep) {
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row[a] < row[b]; });
  const float mx = row[order.back()];
  if (mx == kNegInf) return;  // nothing left to filter
  double z = 0;
  for (int64_t j = 0; j < V; ++j) z += std::exp(static_cast<double>(row[j]) - mx);
  double cum = 0;
  std::vector<int64_t> removed;
  for (int64_t i = 0; i < V - min_keep; ++i) {
    const int64_t j = order[static_cast<size_t>(i)];
    cum += std::exp(static_cast<double>(row[j]) - mx) / z;
    if (cum > 1.0 - static_cast<double>(p)) break;
    removed.push_back(j);
  }
  for (const int64_t j : removed) row[j] = kNegInf;
}

/// argmax, the first of ties (NaN never wins).
int64_t argmax_row(const float* row, int64_t V) {
  int64_t best = 0;
  for (int64_t j = 1; j < V; ++j)
    if (row[j] > row[best]) best = j;
  return best;
}

/// A draw from softmax(row): u ~ U[0, 1) times the total, walked through the weights.
int64_t sample_row(const float* row, int64_t V, Generator& gen, const char* op) {
  const float mx = *std::max_element(row, row + V);
  if (!std::isfinite(mx))
    throw ValueError(std::string(op) + ": cannot sample from a row whose largest logit is " + std::to_string(mx));
  std::vector<double> w(static_cast<size_t>(V));
  double z = 0;
  for (int64_t j = 0; j < V; ++j) z += w[static_cast<size_t>(j)] = std::exp(static_cast<double>(row[j]) - mx);
  double u = static_cast<double>(gen.uniform()) * z;
  int64_t last = 0;
  for (int64_t j = 0; j < V; ++j) {
    const double wj = w[static_cast<size_t>(j)];
    if (wj == 0) continue;
    last = j;
    if ((u -= wj) < 0) return j;
  }
  return last;  // rounding left u a hair above the total: the last token with weight
}

void check_seen(const std::vector<TokenIds>& seen, int64_t B, const char* op) {
  if (!seen.empty() && static_cast<int64_t>(seen.size()) != B)
    throw ShapeError(std::string(op) + ": seen holds " + str(static_cast<int64_t>(seen.size())) +
                     " rows of tokens, the logits have " + str(B));
}

void check_penalty(float penalty, const char* op) {
  if (!(penalty > 0.0f && std::isfinite(penalty)))
    throw ValueError(std::string(op) + ": repetition penalty must be a finite value > 0, got " + std::to_string(penalty));
}

void check_top_p(float p, int64_t min_keep, const char* op) {
  if (!(p > 0.0f && p <= 1.0f)) throw ValueError(std::string(op) + ": top_p must be in (0, 1], got " + std::to_string(p));
  if (min_keep < 1) throw ValueError(std::string(op) + ": min_tokens_to_keep must be >= 1, got " + str(min_keep));
}

}  // namespace

// ---- logits processors ----------------------------------------------------------------------

Tensor repetition_penalty(const Tensor& logits, const std::vector<TokenIds>& seen, float penalty) {
  const char* op = "repetition_penalty";
  int64_t B, V;
  std::vector<float> x = rows_of(logits, op, B, V);
  check_seen(seen, B, op);
  check_penalty(penalty, op);
  for (size_t b = 0; b < seen.size(); ++b) penalize_row(x.data() + static_cast<int64_t>(b) * V, V, seen[b], penalty, op);
  return tensor(x, {B, V});
}

Tensor top_k_filter(const Tensor& logits, int64_t k) {
  int64_t B, V;
  std::vector<float> x = rows_of(logits, "top_k_filter", B, V);
  if (k < 1) throw ValueError("top_k_filter: k must be >= 1, got " + str(k));
  for (int64_t b = 0; b < B; ++b) top_k_row(x.data() + b * V, V, k);
  return tensor(x, {B, V});
}

Tensor top_p_filter(const Tensor& logits, float p, int64_t min_tokens_to_keep) {
  int64_t B, V;
  std::vector<float> x = rows_of(logits, "top_p_filter", B, V);
  check_top_p(p, min_tokens_to_keep, "top_p_filter");
  for (int64_t b = 0; b < B; ++b) top_p_row(x.data() + b * V, V, p, min_tokens_to_keep);
  return tensor(x, {B, V});
}

// ---- the next token -------------------------------------------------------------------------

TokenIds next_tokens(const Tensor& logits, const std::vector<TokenIds>& seen, const SamplingOptions& o,
                     Generator& gen) {
  const char* op = "next_tokens";
  int64_t B, V;
  std::vector<float> x = rows_of(logits, op, B, V);
  check_seen(seen, B, op);
  check_penalty(o.repetition_penalty(), op);
  if (!(o.temperature() > 0.0f && std::isfinite(o.temperature())))
    throw ValueError(std::string(op) + ": temperature must be a finite value > 0, got " + std::to_string(o.temperature()));
  if (o.top_k() < 0) throw ValueError(std::string(op) + ": top_k must be >= 0 (0 = off), got " + str(o.top_k()));
  check_top_p(o.top_p(), 1, op);
  TokenIds out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    float* row = x.data() + b * V;
    if (o.repetition_penalty() != 1.0f && !seen.empty())
      penalize_row(row, V, seen[static_cast<size_t>(b)], o.repetition_penalty(), op);
    if (!o.do_sample()) {
      out[static_cast<size_t>(b)] = argmax_row(row, V);
      continue;
    }
    if (o.temperature() != 1.0f)
      for (int64_t j = 0; j < V; ++j) row[j] /= o.temperature();
    if (o.top_k() > 0) top_k_row(row, V, o.top_k());
    if (o.top_p() < 1.0f) top_p_row(row, V, o.top_p(), 1);
    out[static_cast<size_t>(b)] = sample_row(row, V, gen, op);
  }
  return out;
}

// ---- generate -------------------------------------------------------------------------------

std::vector<TokenIds> generate(const DecodeFn& decoder, const std::vector<TokenIds>& prompts,
                               const GenerateOptions& o, KVCache* cache, Generator* gen) {
  if (!decoder) throw ValueError("generate: the decoder is empty");
  if (prompts.empty()) throw ValueError("generate: no prompts");
  if (o.max_new_tokens() < 0) throw ValueError("generate: max_new_tokens must be >= 0, got " + str(o.max_new_tokens()));
  const int64_t B = static_cast<int64_t>(prompts.size());
  int64_t P = 0;
  for (size_t b = 0; b < prompts.size(); ++b) {
    if (prompts[b].empty()) throw ValueError("generate: prompt " + std::to_string(b) + " is empty");
    P = std::max(P, static_cast<int64_t>(prompts[b].size()));
  }
  std::vector<int64_t> pad(static_cast<size_t>(B));
  std::vector<TokenIds> seqs(static_cast<size_t>(B)), seen = prompts, out(static_cast<size_t>(B));
  for (size_t b = 0; b < prompts.size(); ++b) {
    pad[b] = P - static_cast<int64_t>(prompts[b].size());
    seqs[b].assign(static_cast<size_t>(pad[b]), o.pad_token_id());
    seqs[b].insert(seqs[b].end(), prompts[b].begin(), prompts[b].end());
  }
  const bool padded = std::any_of(pad.begin(), pad.end(), [](int64_t p) { return p > 0; });
  if (o.use_cache()) {
    if (cache == nullptr) throw ValueError("generate: use_cache is set but no KVCache was given");
    if (cache->batch_size() != B)
      throw ShapeError("generate: " + str(B) + " prompts, but the KVCache has batch_size " + str(cache->batch_size()));
    const int64_t need = P + std::max<int64_t>(o.max_new_tokens() - 1, 0);
    if (need > cache->max_length())
      throw ValueError("generate: the longest prompt (" + str(P) + ") and max_new_tokens " + str(o.max_new_tokens()) +
                       " need " + str(need) + " cached positions, the KVCache has max_length " + str(cache->max_length()));
    cache->reset();
    cache->set_left_padding(pad);
  }
  NoGradGuard no_grad;
  Generator& g = gen ? *gen : default_generator();
  std::vector<bool> done(static_cast<size_t>(B), false);
  for (int64_t n = 0; n < o.max_new_tokens(); ++n) {
    const int64_t total = P + n;                                   // tokens in each row so far
    const int64_t start = o.use_cache() && n > 0 ? total - 1 : 0;  // the first one fed now
    const int64_t T = total - start;
    DecodeInput in;
    std::vector<int64_t> ids(static_cast<size_t>(B * T)), pos(static_cast<size_t>(B * T));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        ids[static_cast<size_t>(b * T + t)] = seqs[static_cast<size_t>(b)][static_cast<size_t>(start + t)];
        pos[static_cast<size_t>(b * T + t)] = std::max<int64_t>(0, start + t - pad[static_cast<size_t>(b)]);
      }
    in.ids = Indices(std::move(ids), {B, T});
    in.positions = Indices(std::move(pos), {B, T});
    if (o.use_cache()) {
      in.cache = cache;
    } else if (padded) {
      std::vector<float> m(static_cast<size_t>(B * T), 0.0f);
      for (int64_t b = 0; b < B; ++b) std::fill_n(m.begin() + b * T, pad[static_cast<size_t>(b)], 1.0f);
      in.key_padding_mask = tensor(m, {B, T});
    }
    const Tensor logits = decoder(in);
    if (!logits.defined() || !((logits.dim() == 3 && logits.size(0) == B && logits.size(1) == T) ||
                               (logits.dim() == 2 && logits.size(0) == B)))
      throw ShapeError("generate: the decoder returned logits of shape " +
                       (logits.defined() ? to_string(logits.shape()) : std::string("(undefined)")) +
                       ", expected (B, T, V) or (B, V) with B = " + str(B) + ", T = " + str(T));
    const TokenIds next = next_tokens(logits.dim() == 3 ? select(logits, 1, -1) : logits, seen, o.sampling(), g);
    bool all_done = true;
    for (size_t b = 0; b < next.size(); ++b) {
      int64_t tok = next[b];
      if (done[b]) {
        tok = o.pad_token_id();
      } else {
        out[b].push_back(tok);
        seen[b].push_back(tok);
        done[b] = tok == o.eos_token_id();
      }
      seqs[b].push_back(tok);
      all_done = all_done && done[b];
    }
    if (all_done) break;
  }
  return out;
}

}  // namespace nn
}  // namespace tg
