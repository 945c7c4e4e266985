#pragma once
// Library-internal: MultiheadAttention's packed q/k/v projection (see packed_projection() in
// nn/attention.cpp). Not installed; tests read how often it was packed.
#include <cstdint>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/storage.h"
#include "tapegrad/nn/attention.h"

namespace tg {
namespace nn {
namespace impl {
/// The packed q/k/v projection: weights (3C, C) and biases (3C), and a stamp of each part they
/// were packed from. A part has changed when its storage, version (every write through the
/// API: an optimizer step, load_state_dict, an initializer) or geometry differ: then the parts
/// are packed again, into a fresh storage (graphs recorded before keep the old one). Else the
/// values are compared too, as a raw pointer (data_ptr(), which gradcheck and user code may
/// hold) writes without a version bump; a read of the parts, and no copy, while they stay.
struct PackedInProjection {
  using Stamp = std::tuple<uint64_t, uint32_t, int64_t, std::vector<int64_t>>;
  static Stamp stamp(const Tensor& t) {
    const detail::TensorImpl& i = *t.impl();
    const auto st = i.strides();
    return {i.storage->id, detail::version_of(*i.storage), i.offset(),
            std::vector<int64_t>(st.begin(), st.end())};
  }
  std::mutex mutex;  // modules may run in several threads at once
  std::vector<Stamp> stamps;
  std::shared_ptr<detail::Storage> weight, bias;
  int64_t packs = 0;  // how often it was (re)packed

  /// How often m packed its projection (tests).
  static int64_t packs_of(const MultiheadAttention& m) {
    std::lock_guard<std::mutex> lock(m.packed_->mutex);
    return m.packed_->packs;
  }
};

/// While one is alive, self-attention on this thread projects q, k and v with three GEMMs, as
/// cross-attention does (benchmarks time both; tests compare them).
class SeparateProjectionsScope {
 public:
  SeparateProjectionsScope();
  ~SeparateProjectionsScope();
  SeparateProjectionsScope(const SeparateProjectionsScope&) = delete;
  SeparateProjectionsScope& operator=(const SeparateProjectionsScope&) = delete;
  static bool active();

 private:
  bool previous_;
};
}  // namespace impl

}  // namespace nn
}  // namespace tg
