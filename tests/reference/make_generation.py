#!/usr/bin/python3
"""Reference values for the logits processors of tapegrad/nn/generation.h, from PyTorch 1.13.

Run from the repository root with the system Python (it has torch and numpy):

    /usr/bin/python3 tests/reference/make_generation.py

The processors are written below in torch as Hugging Face's generate defines them
(transformers' RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper,
TopPLogitsWarper; transformers itself is not installed here). Files under
tests/fixtures/generation/:
    logits.npy                     (B, V) fixed logits, B = 4, V = 12 (row 3 has ties)
    seen.npy                       (B, S) int64 tokens seen per row (repeats included)
    top_k.<k>.npy                  top-k filtered logits (-inf where removed), k = 1, 3, 5, 20
    top_p.<p>.npy                  top-p filtered logits, p = 0.3, 0.8, 0.95 (min_tokens_to_keep 1)
    top_p.0.1.keep3.npy            p = 0.1 with min_tokens_to_keep = 3
    penalty.<r>.npy                repetition penalty r = 1.3 and 0.7 over seen
    chain.npy                      softmax(top_p(top_k(temperature(penalty(logits))))):
                                   penalty 1.2, temperature 0.7, top_k 6, top_p 0.9
tests/nn/test_generation.cpp compares tapegrad's processors with them.
"""
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "generation")
torch.manual_seed(0)


def save(name, a):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    np.save(os.path.join(OUT, name + ".npy"), np.array(a, order="C"))


def repetition_penalty(scores, input_ids, penalty):
    """CTRL: a seen token's logit is divided by penalty if positive, multiplied if negative."""
    score = torch.gather(scores, 1, input_ids)
    score = torch.where(score < 0, score * penalty, score / penalty)
    return scores.scatter(1, input_ids, score)


def top_k(scores, k, min_tokens_to_keep=1):
    k = min(max(k, min_tokens_to_keep), scores.size(-1))
    remove = scores < torch.topk(scores, k)[0][..., -1, None]
    return scores.masked_fill(remove, -float("inf"))


def top_p(scores, p, min_tokens_to_keep=1):
    sorted_logits, sorted_indices = torch.sort(scores, descending=False)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    sorted_remove = cumulative <= (1 - p)
    sorted_remove[..., -min_tokens_to_keep:] = 0
    remove = sorted_remove.scatter(1, sorted_indices, sorted_remove)
    return scores.masked_fill(remove, -float("inf"))


B, V = 4, 12
logits = 2.0 * torch.randn(B, V)
logits[3] = torch.tensor([0.5, 2.0, 2.0, -1.0, 3.0, 0.25, -2.0, 1.0, 2.0, -0.5, 0.0, 1.5])  # ties at 2.0
seen = torch.tensor([[0, 1, 1, 5], [2, 3, 4, 11], [7, 7, 7, 7], [1, 4, 6, 9]], dtype=torch.int64)
save("logits", logits)
save("seen", seen)
for k in (1, 3, 5, 20):
    save(f"top_k.{k}", top_k(logits, k))
for p in (0.3, 0.8, 0.95):
    save(f"top_p.{p}", top_p(logits, p))
save("top_p.0.1.keep3", top_p(logits, 0.1, min_tokens_to_keep=3))
for r in (1.3, 0.7):
    save(f"penalty.{r}", repetition_penalty(logits, seen, r))
chain = top_p(top_k(repetition_penalty(logits, seen, 1.2) / 0.7, 6), 0.9).softmax(dim=-1)
save("chain", chain)
