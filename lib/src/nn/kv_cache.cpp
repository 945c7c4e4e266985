// KVCache: per-layer key/value buffers preallocated to max_length, the left padding of a
// batch, and the masks a cached attention step needs.
//
// Legend: B = batch, M = max_length, T = new positions, P = past (cached) positions, C = embed_dim.
#include "tapegrad/nn/kv_cache.h"

#include <algorithm>

#include "tapegrad/autograd.h"
#include "tapegrad/error.h"
#include "tapegrad/nn/attention.h"

namespace tg {
namespace nn {

namespace {
std::string str(int64_t n) { return std::to_string(n); }
}  // namespace

KVCache::KVCache(int64_t num_layers, int64_t batch_size, int64_t max_length)
    : batch_(batch_size), max_length_(max_length) {
  if (num_layers <= 0 || batch_size <= 0 || max_length <= 0)
    throw ValueError("KVCache: num_layers, batch_size and max_length must be positive, got " + str(num_layers) +
                     ", " + str(batch_size) + ", " + str(max_length));
  layers_.resize(static_cast<size_t>(num_layers));
  pad_.assign(static_cast<size_t>(batch_size), 0);
}

int64_t KVCache::length() const {
  const int64_t n = layers_[0].length;
  for (size_t l = 1; l < layers_.size(); ++l)
    if (layers_[l].length != n)
      throw ValueError("KVCache: layer " + std::to_string(l) + " holds " + str(layers_[l].length) +
                       " positions but layer 0 holds " + str(n) + ": every step must run each of the " +
                       str(num_layers()) + " layers once (is this cache made for this model?)");
  return n;
}

void KVCache::set_left_padding(const std::vector<int64_t>& pad) {
  if (length() != 0)
    throw ValueError("KVCache: set_left_padding on a cache holding " + str(length()) +
                     " positions; call it before the first step (or after reset())");
  if (static_cast<int64_t>(pad.size()) != batch_)
    throw ShapeError("KVCache: set_left_padding got " + str(static_cast<int64_t>(pad.size())) +
                     " rows, the cache has batch_size " + str(batch_));
  for (size_t b = 0; b < pad.size(); ++b)
    if (pad[b] < 0 || pad[b] > max_length_)
      throw ValueError("KVCache: padding of row " + std::to_string(b) + " is " + str(pad[b]) +
                       ", expected 0..max_length " + str(max_length_));
  pad_ = pad;
  padded_ = std::any_of(pad.begin(), pad.end(), [](int64_t p) { return p > 0; });
  mask_ = AttnMask();
  mask_past_ = mask_T_ = -1;
}

Indices KVCache::positions(int64_t T) const {
  if (T < 0) throw ValueError("KVCache::positions: T must be >= 0, got " + str(T));
  const int64_t P = length();
  std::vector<int64_t> pos(static_cast<size_t>(batch_ * T));
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t t = 0; t < T; ++t)
      pos[static_cast<size_t>(b * T + t)] = std::max<int64_t>(0, P + t - pad_[static_cast<size_t>(b)]);
  return Indices(std::move(pos), {batch_, T});
}

Tensor KVCache::key_padding_mask() const {
  if (!padded_) return Tensor();
  const int64_t P = length();
  std::vector<float> m(static_cast<size_t>(batch_ * P), 0.0f);
  for (int64_t b = 0; b < batch_; ++b)
    std::fill_n(m.begin() + b * P, std::min(P, pad_[static_cast<size_t>(b)]), 1.0f);
  return tensor(m, {batch_, P});
}

void KVCache::reset() {
  for (Layer& l : layers_) {
    l.length = 0;
    l.owner = nullptr;
    l.owner_name.clear();
  }
  pad_.assign(static_cast<size_t>(batch_), 0);
  padded_ = false;
  mask_ = AttnMask();
  mask_past_ = mask_T_ = -1;
}

void KVCache::truncate(int64_t n) {
  const int64_t P = length();
  if (n < 0 || n > P)
    throw ValueError("KVCache::truncate: n must be in [0, " + str(P) + "] (the cached length), got " + str(n));
  for (Layer& l : layers_) l.length = n;
}

const KVCache::Layer& KVCache::at(int64_t layer, const char* what) const {
  if (layer < 0 || layer >= num_layers())
    throw IndexError(std::string("KVCache::") + what + ": layer " + str(layer) + " is out of range for a cache of " +
                     str(num_layers()) + " layers");
  return layers_[static_cast<size_t>(layer)];
}

Tensor KVCache::keys(int64_t layer) const {
  const Layer& l = at(layer, "keys");
  return l.k.defined() ? narrow(l.k, 1, 0, l.length) : Tensor();
}

Tensor KVCache::values(int64_t layer) const {
  const Layer& l = at(layer, "values");
  return l.v.defined() ? narrow(l.v, 1, 0, l.length) : Tensor();
}

int64_t KVCache::nbytes() const {
  int64_t n = 0;
  for (const Layer& l : layers_)
    if (l.k.defined()) n += (l.k.numel() + l.v.numel()) * static_cast<int64_t>(sizeof(float));
  return n;
}

// Query i of the step (absolute position P + i) sees key j iff j <= P + i (causal, aligned at
// the bottom right) and j is not padding (j >= pad[b]). One new position with no padding sees
// everything: no mask at all.
AttnMask KVCache::step_mask(int64_t P, int64_t T) {
  if (T == 1 && !padded_) return AttnMask();
  if (P == mask_past_ && T == mask_T_) return mask_;
  const int64_t Tk = P + T, rows = padded_ ? batch_ : 1;
  std::vector<float> m(static_cast<size_t>(rows * T * Tk), 0.0f);  // 1 = masked out
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t i = 0; i < T; ++i) {
      float* row = m.data() + (b * T + i) * Tk;
      std::fill(row + P + i + 1, row + Tk, 1.0f);
      if (padded_) std::fill_n(row, std::min(Tk, pad_[static_cast<size_t>(b)]), 1.0f);
    }
  const Shape shape = padded_ ? Shape{batch_, 1, T, Tk} : Shape{T, Tk};
  mask_ = AttnMask::boolean(tensor(m, shape));
  mask_past_ = P;
  mask_T_ = T;
  return mask_;
}

KVCache::Step KVCache::append(int64_t layer, const MultiheadAttention& owner, const Tensor& k, const Tensor& v) {
  at(layer, "append");
  Layer& l = layers_[static_cast<size_t>(layer)];
  const int64_t B = k.size(0), T = k.size(1), C = k.size(2);
  if (l.owner != nullptr && l.owner != &owner)
    throw ValueError("KVCache: layer " + str(layer) + " holds the keys of " + l.owner_name + ", not of " +
                     owner.where() + " (a cache from another model or another layer index; reset() it to reuse it)");
  if (B != batch_)
    throw ShapeError(owner.where() + ": input batch " + str(B) + " does not match the KVCache's batch_size " +
                     str(batch_));
  if (l.length + T > max_length_)
    throw ValueError(owner.where() + ": " + str(T) + " new positions after the " + str(l.length) +
                     " cached exceed the KVCache's max_length " + str(max_length_));
  if (l.k.defined() && l.k.size(2) != C)
    throw ShapeError(owner.where() + ": embed_dim " + str(C) + ", but layer " + str(layer) +
                     " of the KVCache holds keys of width " + str(l.k.size(2)) + " (a cache from another model?)");
  if (l.owner == nullptr) {
    l.owner = &owner;
    l.owner_name = owner.where();
  }
  NoGradGuard no_grad;  // the cache is never part of a graph
  if (!l.k.defined()) {
    l.k = zeros({batch_, max_length_, C});
    l.v = zeros({batch_, max_length_, C});
  }
  narrow(l.k, 1, l.length, T).copy_(k);
  narrow(l.v, 1, l.length, T).copy_(v);
  Step s;
  s.past = l.length;
  l.length += T;
  s.k = narrow(l.k, 1, 0, l.length);
  s.v = narrow(l.v, 1, 0, l.length);
  s.mask = step_mask(s.past, T);
  if (layer == num_layers() - 1) {  // the step's last layer: let the mask go with its Step
    mask_ = AttnMask();
    mask_past_ = mask_T_ = -1;
  }
  return s;
}

}  // namespace nn
}  // namespace tg
