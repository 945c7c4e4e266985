#pragma once
// W3's model, shared by bench/workloads.cpp (one process) and bench/ddp_bench.cpp (MPI ranks):
// token + position embeddings, pre-LN causal blocks, a final LayerNorm and a Linear head.
// Legend: B = batch, T = sequence length, C = d_model, V = vocabulary.
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <tapegrad/tapegrad.h>

namespace bench {

class TinyGPT : public tg::nn::Module {
 public:
  TinyGPT(int64_t vocab, int64_t T, int64_t C, int64_t heads, int64_t layers, int64_t d_ff)
      : Module("TinyGPT") {
    namespace nn = tg::nn;
    tok_emb = register_module("tok_emb", std::make_shared<nn::Embedding>(vocab, C));
    pos_emb = register_module("pos_emb", std::make_shared<nn::Embedding>(T, C));
    auto list = register_module("blocks", std::make_shared<nn::ModuleList>());
    for (int64_t l = 0; l < layers; ++l)
      blocks.push_back(list->push_back(
          std::make_shared<nn::TransformerBlock>(nn::TransformerBlockOptions(C, heads, d_ff))));
    ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(C));
    head = register_module("head", std::make_shared<nn::Linear>(C, vocab));
    std::vector<int64_t> p(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) p[static_cast<size_t>(t)] = t;
    positions = tg::Indices(std::move(p), {T});
  }

  /// ids (B, T) -> logits (B, T, V)
  tg::Tensor forward(const tg::Indices& ids) {
    tg::Tensor x = tok_emb->forward(ids) + pos_emb->forward(positions);  // (B, T, C)
    const auto causal = tg::nn::AttentionForwardOptions().causal(true);
    for (const auto& b : blocks) x = b->forward(x, causal);
    return head->forward(ln_f->forward(x));
  }

 private:
  std::shared_ptr<tg::nn::Embedding> tok_emb, pos_emb;
  std::vector<std::shared_ptr<tg::nn::TransformerBlock>> blocks;
  std::shared_ptr<tg::nn::LayerNorm> ln_f;
  std::shared_ptr<tg::nn::Linear> head;
  tg::Indices positions;
};

}  // namespace bench
