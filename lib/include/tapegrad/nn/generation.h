#pragma once
// Autoregressive generation for any decoder: logits processors (repetition penalty,
// temperature, top-k, top-p), the next-token choice (greedy or sampled), and `generate`, which
// runs a user's decoder step by step through a KVCache.
//
// Legend: B = batch, T = positions fed in one step, V = vocabulary.
//
// The filters follow Hugging Face's logits warpers, in the order its generate applies them:
// repetition penalty, temperature, top-k, top-p; a filtered logit becomes -inf. Sampling
// draws from softmax(logits) with a tapegrad Generator, so a seed gives the same tokens.
#include <cstdint>
#include <functional>
#include <vector>

#include "tapegrad/arg.h"
#include "tapegrad/nn/kv_cache.h"
#include "tapegrad/random.h"
#include "tapegrad/tensor.h"

namespace tg {
namespace nn {

using TokenIds = std::vector<int64_t>;

// ---- logits processors: logits (B, V) -> (B, V) ---------------------------------------------

/// CTRL's repetition penalty: in row b, every token of seen[b] has its logit divided by
/// `penalty` when positive and multiplied by it when negative (penalty > 0; 1 = nothing).
Tensor repetition_penalty(const Tensor& logits, const std::vector<TokenIds>& seen, float penalty);
/// Keeps each row's k largest logits (and any tied with the k-th); the rest become -inf.
Tensor top_k_filter(const Tensor& logits, int64_t k);
/// Nucleus filtering: keeps each row's smallest set of most likely tokens whose softmax
/// probability reaches p (at least min_tokens_to_keep); the rest become -inf. 0 < p <= 1.
Tensor top_p_filter(const Tensor& logits, float p, int64_t min_tokens_to_keep = 1);

// ---- choosing the next token ----------------------------------------------------------------

struct SamplingOptions {
  /// false: greedy (argmax, the first of ties); true: draw from softmax(processed logits).
  TG_ARG(bool, do_sample) = false;
  /// Logits are divided by it before sampling (> 0).
  TG_ARG(float, temperature) = 1.0f;
  /// 0: off.
  TG_ARG(int64_t, top_k) = 0;
  /// 1: off.
  TG_ARG(float, top_p) = 1.0f;
  /// 1: off. Applies to the prompt's and the generated tokens, greedy or sampled.
  TG_ARG(float, repetition_penalty) = 1.0f;
};

/// One token per row from logits (B, V): the processors of `options`, then argmax or a draw
/// from `gen`. seen[b] (may be empty) feeds the repetition penalty.
TokenIds next_tokens(const Tensor& logits, const std::vector<TokenIds>& seen, const SamplingOptions& options,
                     Generator& gen);

// ---- generate -------------------------------------------------------------------------------

/// What a decoder step is given.
struct DecodeInput {
  /// (B, T): the new tokens when `cache` is set (the padded prompt, then one token per step);
  /// without a cache, the whole sequence so far.
  Indices ids;
  /// (B, T): position ids of `ids`, each row counting from its first real token.
  Indices positions;
  /// Without a cache and with padded prompts: (B, T) boolean, 1 = padding, for the attention's
  /// key_padding_mask; else undefined (with a cache, the cache masks padding itself).
  Tensor key_padding_mask;
  /// The cache to pass to each cached TransformerBlock, or null: recompute everything.
  KVCache* cache = nullptr;
};

/// A decoder step: logits (B, T, V) for every position of input.ids, or (B, V) for the last.
using DecodeFn = std::function<Tensor(const DecodeInput& input)>;

struct GenerateOptions {
  TG_ARG(int64_t, max_new_tokens) = 32;
  TG_ARG(SamplingOptions, sampling);
  /// A row stops after producing it (-1: none); finished rows are filled with pad_token_id.
  TG_ARG(int64_t, eos_token_id) = -1;
  /// Fills the left padding of shorter prompts and the rows that finished.
  TG_ARG(int64_t, pad_token_id) = 0;
  /// false: call the decoder on the whole sequence at each step, without a cache.
  TG_ARG(bool, use_cache) = true;
};

/// Generates up to max_new_tokens tokens after each prompt (all prompts non-empty) with
/// `decoder`, returning only the new tokens of each row (cut after eos). With use_cache, the
/// cache (batch_size = the number of prompts, max_length >= the longest prompt +
/// max_new_tokens - 1) is reset, padded for the prompts, filled by one step over the prompts
/// and then one step per token. Runs under NoGradGuard; put the model in eval() first.
/// `gen` draws the samples (default: the global generator).
std::vector<TokenIds> generate(const DecodeFn& decoder, const std::vector<TokenIds>& prompts,
                               const GenerateOptions& options, KVCache* cache = nullptr,
                               Generator* gen = nullptr);

}  // namespace nn
}  // namespace tg
