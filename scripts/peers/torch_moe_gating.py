#!/usr/bin/env python3
"""PyTorch peer for ch17/moe_gating: DeepSeek-V3 and Mixtral MoE gating, eager and torch.compile.

The same work as ch17/moe_gating, written as a PyTorch user writes it, on the shapes ch17 times
(tokens 1, 128, 8192, 16384; FP32 logits):
  deepseek_v3: sigmoid scores + a per-expert bias for the choice; 256 experts in 8 groups, a group
    scored by its two best; keep 4 groups; top 8 experts of those; weights = the sigmoid scores of
    the 8 (no bias), renormalised (DeepSeek-V3's routed_scaling_factor left out, as in ch17);
  mixtral: softmax over 8 experts, top 2, renormalised over the 2.
Also `softmax_top8` (softmax over 256, topk 8): the simple gate on the same logits, for scale.
Bytes are counted as ch17 counts them: the logits read once, the bias, indices and weights
written once (int32 + float32, as ch17 writes them; torch.topk's int64 indices are not counted).
Run it in the same GPU session as `bench compare --chapter ch17` so the two are comparable.

  python3 scripts/peers/torch_moe_gating.py [--json FILE] [--only deepseek_v3,mixtral,softmax_top8]

Timing: CUDA events around a batch of launches after warm-up, the median of several batches
(torch_rowwise.median_us); the command line is torch_inference.peer_main's.
torch.topk breaks ties by no documented rule, so this peer is timed, not checked against ch17.
"""
import sys

try:
    import torch

    from torch_inference import peer_main, report, skipped
    from torch_rowwise import median_us
except ImportError as missing:  # the GPU machine has PyTorch; say so anywhere else, and succeed
    print(f"SKIPPED: {missing}")
    sys.exit(0)

TOKENS = [1, 128, 8192, 16384]
GROUPS, KEPT_GROUPS, TOP_K = 8, 4, 8


def deepseek_v3_gate(logits, bias):
    scores = logits.sigmoid()
    choice = scores + bias
    t = logits.shape[0]
    group_scores = choice.view(t, GROUPS, -1).topk(2, dim=-1)[0].sum(dim=-1)
    group_idx = group_scores.topk(KEPT_GROUPS, dim=-1)[1]
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
    expert_mask = group_mask.unsqueeze(-1).expand(t, GROUPS, logits.shape[1] // GROUPS).reshape(t, -1)
    masked = choice.masked_fill(expert_mask == 0, float("-inf"))
    idx = masked.topk(TOP_K, dim=-1)[1]
    weights = scores.gather(1, idx)
    return idx, weights / weights.sum(dim=-1, keepdim=True)


def mixtral_gate(logits, bias):
    probs = logits.softmax(dim=-1)
    weights, idx = probs.topk(2, dim=-1)
    return idx, weights / weights.sum(dim=-1, keepdim=True)


def softmax_top8(logits, bias):
    return logits.softmax(dim=-1).topk(TOP_K, dim=-1)


def run(name, gate, experts, k, uses_bias):
    """Eager and compiled at every token count; logits and bias drawn as ch17 draws them."""
    bias = torch.randint(-1, 2, (experts,), device="cuda").float()
    modes = [("eager", gate), ("compiled", torch.compile(gate, dynamic=False))]
    for t in TOKENS:
        logits = torch.randint(-8, 9, (t, experts), device="cuda").float()
        nbytes = logits.numel() * 4 + (experts * 4 if uses_bias else 0) + t * k * 8
        for mode, fn in modes:
            try:
                us = median_us(lambda: fn(logits, bias))
            except Exception as e:  # a compile failure names itself and the rest go on
                skipped(name, f"tokens {t} {mode}", e)
                continue
            report(name, f"tokens {t}", tokens=t, experts=experts, top_k=k, mode=mode, us=us,
                   gbs=nbytes / (us * 1e-6) / 1e9)


def main():
    peer_main(__doc__, {
        "deepseek_v3": lambda copy: run("deepseek_v3", deepseek_v3_gate, 256, TOP_K, True),
        "mixtral": lambda copy: run("mixtral", mixtral_gate, 8, 2, False),
        "softmax_top8": lambda copy: run("softmax_top8", softmax_top8, 256, TOP_K, False),
    })


if __name__ == "__main__":
    sys.exit(main())
