// DistributedDataParallel: gradient averaging in contiguous buckets.
//
// One bucket on the wire (floats):  [ grad of p_0 | grad of p_1 | ... | flag_0 flag_1 ... ]
// flag_k is 1 where this rank has a gradient for p_k, else 0 (and its slot holds zeros). After
// the sum over ranks, flag_k counts the ranks that had one: 0 means nobody used p_k, so its
// gradient stays undefined; otherwise the gradient becomes sum / W (missing ones count as 0).
//
// Legend: W = world size, P = parameters taking part.
#include <algorithm>
#include <string>

#include "distributed_internal.h"
#include "tapegrad/distributed.h"

namespace tg {
namespace distributed {

std::vector<DistributedDataParallel::Bucket> plan_buckets(const std::vector<int64_t>& numels,
                                                          int64_t bucket_bytes) {
  if (bucket_bytes < 1)
    throw ValueError("DistributedDataParallel: bucket_bytes must be >= 1, got " +
                     std::to_string(bucket_bytes));
  const int64_t cap = std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)));
  std::vector<DistributedDataParallel::Bucket> buckets;
  DistributedDataParallel::Bucket current;
  for (size_t i = 0; i < numels.size(); ++i) {
    if (!current.params.empty() && current.numel + numels[i] > cap) {
      buckets.push_back(std::move(current));
      current = {};
    }
    current.params.push_back(static_cast<int64_t>(i));
    current.numel += numels[i];
  }
  if (!current.params.empty()) buckets.push_back(std::move(current));
  return buckets;
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 const DDPOptions& options)
    : module_(std::move(module)), options_(options) {
  if (!module_) throw ValueError("DistributedDataParallel: the module is null");
  if (options_.verify_every() < 0)
    throw ValueError("DistributedDataParallel: verify_every must be >= 0, got " +
                     std::to_string(options_.verify_every()));
  world_size();  // DistributedError before init()
  for (auto& [name, p] : module_->named_parameters()) {
    const bool seen = std::any_of(params_.begin(), params_.end(),
                                  [&](const auto& e) { return e.second.is_same(p); });
    if (p.requires_grad() && !seen) params_.emplace_back(name, p);  // a tied weight once
  }
  // Every rank must pack the same gradients in the same order, or the sums mix parameters.
  detail::check_same_layout(params_, 0, "DistributedDataParallel: the parameters that require grad");
  std::vector<int64_t> numels;
  for (const auto& entry : params_) numels.push_back(entry.second.numel());
  buckets_ = plan_buckets(numels, options_.bucket_bytes());
  size_t staging = 0;
  for (const auto& b : buckets_)
    staging = std::max(staging, static_cast<size_t>(b.numel) + b.params.size());
  staging_.resize(staging);
  if (options_.broadcast_on_init()) broadcast_state();  // also checks the models agree
}

void DistributedDataParallel::sync_gradients() {
  ++syncs_;
  if (options_.verify_every() > 0 && syncs_ % options_.verify_every() == 0) verify_state();
  const int w = world_size();
  if (w == 1) return;  // the mean over one rank is the gradient itself
  const float scale = 1.0f / static_cast<float>(w);
  for (const Bucket& bucket : buckets_) {
    float* grads = staging_.data();
    float* flags = grads + bucket.numel;
    // Pack.
    float* p = grads;
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      const Tensor& param = params_[bucket.params[k]].second;
      const Tensor g = param.grad();
      const int64_t n = param.numel();
      if (g.defined()) std::copy_n(g.data_ptr(), n, p);
      else std::fill_n(p, n, 0.0f);
      flags[k] = g.defined() ? 1.0f : 0.0f;
      p += n;
    }
    allreduce(grads, bucket.numel + static_cast<int64_t>(bucket.params.size()), ReduceOp::Sum);
    // Unpack the mean.
    p = grads;
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      const Tensor& param = params_[bucket.params[k]].second;
      const int64_t n = param.numel();
      if (flags[k] != 0.0f) {
        Tensor g = param.grad();
        if (!g.defined()) {
          g = zeros(param.shape());
          param.set_grad(g);
        }
        float* dst = g.data_ptr();
        for (int64_t j = 0; j < n; ++j) dst[j] = p[j] * scale;
      }
      p += n;
    }
  }
}

}  // namespace distributed
}  // namespace tg
