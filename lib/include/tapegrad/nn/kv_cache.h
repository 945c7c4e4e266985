#pragma once
// The key/value cache of autoregressive decoding: each attention layer keeps the keys and
// values of every position it has seen, so a new token costs one row of projections and one
// row of attention instead of a forward over the whole prefix.
//
// Legend: L = layers, B = batch, M = max_length (capacity), T = new positions, C = embed_dim.
//
//   nn::KVCache cache(L, B, M);                           // one per generation, reusable
//   x = tok_emb(ids) + pos_emb(cache.positions(T));       // ids (B, T): the new tokens only
//   for (l...) x = blocks[l]->forward(x, cache, l);       // TransformerBlock, cached
//
// Each layer owns a (B, M, C) buffer for its keys and one for its values, allocated at the
// layer's first step (so C comes from the layer) and never copied or regrown: a step writes
// its T rows at [length, length + T). The cache is bound to the attention modules that fill
// it; another model's layers are refused until reset().
//
// Batches of prompts with different lengths are LEFT-padded (Hugging Face's generate does
// the same): set_left_padding({p0, p1, ...}) before the first step says row b starts with
// p_b padding positions. Those keys are masked out everywhere, and positions() counts each
// row's positions from its first real token.
#include <cstdint>
#include <string>
#include <vector>

#include "tapegrad/ops.h"
#include "tapegrad/tensor.h"

namespace tg {
namespace nn {

class MultiheadAttention;

class KVCache {
 public:
  /// num_layers attention layers, batch_size rows, room for max_length positions per row.
  KVCache(int64_t num_layers, int64_t batch_size, int64_t max_length);
  /// Not copyable (a copy would share the buffers); movable.
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;
  KVCache(KVCache&&) = default;
  KVCache& operator=(KVCache&&) = default;

  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  int64_t batch_size() const { return batch_; }
  int64_t max_length() const { return max_length_; }
  /// Positions cached so far (padding included). Between steps every layer holds as many;
  /// tg::ValueError when they differ (a step that did not run every layer once).
  int64_t length() const;

  /// Row b begins with pad[b] padding positions (left padding); size batch_size(), on an
  /// empty cache only. Cleared by reset().
  void set_left_padding(const std::vector<int64_t>& pad);
  const std::vector<int64_t>& left_padding() const { return pad_; }
  /// Position ids (B, T) of the next T positions: row b's count from its first real token
  /// (length() + t - pad[b], 0 on padding). Feed them to a learned position embedding.
  Indices positions(int64_t T) const;
  /// The boolean mask (B, length()) that marks padding keys (1 = padding), or undefined when
  /// no row is padded: what a full forward over the same batch needs as key_padding_mask.
  Tensor key_padding_mask() const;

  /// Forgets every position and the padding, and unbinds the layers (the cache may then serve
  /// another model); the buffers are kept for reuse.
  void reset();
  /// Keeps the first n positions of every layer (n <= length()), e.g. to rewind to a prompt.
  void truncate(int64_t n);

  /// Layer l's cached keys and values, (B, length, C) views of its buffers.
  Tensor keys(int64_t layer) const;
  Tensor values(int64_t layer) const;
  /// Bytes held by the key/value buffers.
  int64_t nbytes() const;

 private:
  friend class MultiheadAttention;
  struct Layer {
    Tensor k, v;                     // (B, M, C) once allocated
    int64_t length = 0;              // positions written
    const void* owner = nullptr;     // the MultiheadAttention that fills this layer
    std::string owner_name;          // for errors
  };
  /// What one attention step reads: every cached key and value including the new ones, and
  /// the mask over them (undefined when nothing is masked).
  struct Step {
    Tensor k, v;   // (B, past + T, C) views of the buffers (row stride M·C)
    AttnMask mask; // (T, past + T) causal, or (B, 1, T, past + T) with padding
    int64_t past = 0;
  };
  /// Writes k, v (B, T, C) of `layer` after its cached positions. Called by MultiheadAttention.
  Step append(int64_t layer, const MultiheadAttention& owner, const Tensor& k, const Tensor& v);
  const Layer& at(int64_t layer, const char* what) const;
  /// The mask of a step of T new positions after `past` cached ones (kept for the other layers).
  AttnMask step_mask(int64_t past, int64_t T);

  std::vector<Layer> layers_;
  int64_t batch_, max_length_;
  std::vector<int64_t> pad_;  // per row; all zeros when unpadded
  bool padded_ = false;
  AttnMask mask_;             // this step's mask, shared by its layers until the last one
  int64_t mask_past_ = -1, mask_T_ = -1;
};

}  // namespace nn
}  // namespace tg
