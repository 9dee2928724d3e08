#!/usr/bin/env python3
"""PyTorch peers for ch17/moe_gating (MoE gating, eager and torch.compile) and ch15/moe_dispatch.

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

moe_dispatch (ch15/moe_dispatch's shape: 8192 tokens x top-8 over 128 experts, hidden 2048 -> 768,
BF16), on ch15's own routing (the same seeded draw, mt19937_64 reimplemented here, so the same
per-expert counts and offsets), uniform and skewed:
  - grouped_mm: torch._grouped_mm over the already-permuted rows with the offsets (the GEMM alone);
  - grouped_mm dispatch: the permutation (stable sort of the expert ids, row gather), the
    grouped_mm and the weighted combine: ch15's optimized side's work;
  - python loop: per expert the routed rows gathered, F.linear, and index_add_ of the weighted
    result: ch15's baseline's work, as a PyTorch user writes it.
TFLOP/s on 2 x (tokens x top_k) x 2048 x 768, the flops ch15 declares.

  python3 scripts/peers/torch_moe_gating.py [--json FILE] [--only deepseek_v3,mixtral,softmax_top8,moe_dispatch]

Timing: CUDA events around a batch of launches after warm-up, the median of several batches
(torch_rowwise.median_us); the command line is torch_inference.peer_main's.
torch.topk breaks ties by no documented rule, so this peer is timed, not checked against ch17.
"""
import sys

try:
    import torch

    from torch_host import gpu_timeline
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


MOE_TOKENS, MOE_EXPERTS, MOE_TOP_K, MOE_HIDDEN, MOE_FFN = 8192, 128, 8, 2048, 768
HOT_EXPERTS, HOT_BIAS, ROUTING_SEED = 4, 64, 15  # ch15/moe_dispatch_plan.hpp's


class Mt19937_64:
    """std::mt19937_64 (the C++ standard fixes its sequence): ch15's routing draws from it."""

    def __init__(self, seed):
        self.mt = [seed & (2**64 - 1)]
        for i in range(1, 312):
            self.mt.append((6364136223846793005 * (self.mt[-1] ^ (self.mt[-1] >> 62)) + i) & (2**64 - 1))
        self.index = 312

    def __call__(self):
        if self.index >= 312:
            mt = self.mt
            for i in range(312):
                x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
                mt[i] = mt[(i + 156) % 312] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            self.index = 0
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        return y ^ (y >> 43)


def ch15_routing(tokens, experts, k, skewed):
    """moe::make_routing: k distinct experts per token drawn in proportion to their odds (hot
    experts kHotBias), weights of 1..16 parts normalised."""
    rng = Mt19937_64(ROUTING_SEED)
    step = experts // HOT_EXPERTS
    base = [HOT_BIAS if skewed and e % step == 0 and e // step < HOT_EXPERTS else 1 for e in range(experts)]
    ids, weights = [], []
    for _ in range(tokens):
        odds, total, raw = list(base), sum(base), []
        for _ in range(k):
            pick, e = rng() % total, 0
            while pick >= odds[e]:
                pick -= odds[e]
                e += 1
            ids.append(e)
            total -= odds[e]
            odds[e] = 0
            raw.append(1 + rng() % 16)
        weights += [r / sum(raw) for r in raw]
    return (torch.tensor(ids, dtype=torch.int32, device="cuda").view(tokens, k),
            torch.tensor(weights, dtype=torch.float32, device="cuda").view(tokens, k))


def run_moe_dispatch():
    t, e, k, h, n = MOE_TOKENS, MOE_EXPERTS, MOE_TOP_K, MOE_HIDDEN, MOE_FFN
    flops = 2.0 * t * k * h * n
    x = torch.empty(t, h, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    w = torch.empty(e, n, h, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)  # W_e [ffn][hidden]
    w_t = w.transpose(1, 2)  # [E][hidden][ffn], k-contiguous: what _grouped_mm wants for BF16
    for routing in ("uniform", "skewed"):
        ids, gates = ch15_routing(t, e, k, routing == "skewed")
        flat = ids.flatten().long()

        def dispatch():
            order = torch.argsort(flat, stable=True)
            offs = torch.bincount(flat, minlength=e).cumsum(0).to(torch.int32)
            y_sorted = torch._grouped_mm(x[order // k], w_t, offs=offs)
            y_routed = torch.empty_like(y_sorted).index_copy_(0, order, y_sorted)
            return (y_routed.view(t, k, n).float() * gates.unsqueeze(-1)).sum(1).to(torch.bfloat16)

        def loop():
            y = torch.zeros(t, n, dtype=torch.float32, device="cuda")
            for expert in range(e):
                token, slot = torch.where(ids == expert)
                if token.numel():
                    out = torch.nn.functional.linear(x[token], w[expert]).float()
                    y.index_add_(0, token, out * gates[token, slot].unsqueeze(-1))
            return y.to(torch.bfloat16)

        order = torch.argsort(flat, stable=True)
        x_sorted = x[order // k].contiguous()
        offs = torch.bincount(flat, minlength=e).cumsum(0).to(torch.int32)
        for label, fn in (("grouped_mm", lambda: torch._grouped_mm(x_sorted, w_t, offs=offs)),
                          ("grouped_mm dispatch", dispatch), ("python loop", loop)):
            try:
                us = median_us(fn, batches=7, per_batch=5)
            except Exception as err:
                skipped("moe_dispatch", f"{routing} {label}", err)
                continue
            report("moe_dispatch", f"{routing} {label}", tokens=t, experts=e, top_k=k, us=us,
                   tflops=flops / (us * 1e-6) / 1e12)
            # Which kernels PyTorch runs for it, with their times (ncu sees only CUTLASS's
            # prepare_grouped_gemm_data of the grouped GEMM: chapters/ch15/README.md).
            if label != "python loop" and (timeline := gpu_timeline(fn)) is not None:
                report("moe_dispatch_timeline", f"{routing} {label}", **timeline)


def main():
    peer_main(__doc__, {
        "deepseek_v3": lambda copy: run("deepseek_v3", deepseek_v3_gate, 256, TOP_K, True),
        "mixtral": lambda copy: run("mixtral", mixtral_gate, 8, 2, False),
        "softmax_top8": lambda copy: run("softmax_top8", softmax_top8, 256, TOP_K, False),
        "moe_dispatch": lambda copy: run_moe_dispatch(),
    })


if __name__ == "__main__":
    sys.exit(main())
