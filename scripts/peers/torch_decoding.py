#!/usr/bin/env python3
"""PyTorch peers for ch18's decoding kernels, on ch18's shapes: what a user would call instead.

  - flash_decoding: one query token per (sequence, head) over 65,536 cached keys, 32 heads, head
    dim 128, batch 1, 2, 4 and 8 (ch18/flash_decoding and its batch twins): SDPA per backend; TB/s
    on the K and V bytes (2*b*h*L*d*2), and that as a percentage of the device's copy rate;
  - block_sparse: prefill attention, 32 heads, 8,192 tokens, head dim 128, a 128x128 block mask
    keeping each row's diagonal block plus random others, a quarter of the blocks in all
    (ch18/block_sparse_attention's pattern; Python's generator draws other blocks than the C++
    one, at the same density): SDPA with the mask expanded to a dense boolean one, and
    FlexAttention (compiled) with a BlockMask that skips the empty blocks; TFLOP/s counted on the
    kept blocks only (4*d*h*128*128 per block), as the chapter counts them;
  - speculative_verify: 16 sequences, 32 heads, 4,096 cached keys, 8 draft tokens verified in
    one pass, draft i seeing the cache and drafts 0..i (ch18/speculative_verify's optimized
    side): SDPA with that mask; draft tokens per second.
A feature this PyTorch or GPU lacks prints SKIPPED with the reason; the rest still run. Run it in
the same GPU session as `bench compare --chapter ch18`, so the two are comparable.

  python3 scripts/peers/torch_decoding.py [--json FILE] [--only flash_decoding,block_sparse,speculative_verify] [--burst-only]

Timing: CUDA events around a batch of launches after warm-up, the median of several batches
(torch_rowwise.median_us): a burst, near the boost clock; every row's `us`. The block_sparse rows,
whose example the harness times in sustained mode (at the power limit), are also timed as the
harness times it (torch_inference.timed, torch_rowwise.sustained_us: a 1 s soak, then >= 1 s of
~20 ms batches back to back): `sustained_us`, `sustained_tflops` and the SM clock over those
samples; set ours beside those. About 2 s a row (longer where one call passes 50 ms: at least 20
of them); --burst-only leaves them out.
"""
import random
import sys

try:
    import torch
    import torch.nn.functional as F

    from torch_inference import peer_main, report, sdpa_backends, skipped, timed
    from torch_rowwise import median_us
except ImportError as missing:  # the GPU machine has PyTorch; say so anywhere else, and succeed
    print(f"SKIPPED: {missing}")
    sys.exit(0)

HEADS, HEAD_DIM = 32, 128


def run_flash_decoding(copy_tbs):
    keys = 65536
    for batch in (1, 2, 4, 8):
        q = torch.randn(batch, HEADS, 1, HEAD_DIM, dtype=torch.bfloat16, device="cuda") * 4
        k, v = (torch.rand(batch, HEADS, keys, HEAD_DIM, device="cuda").mul_(2).sub_(1).to(torch.bfloat16)
                for _ in range(2))
        kv_bytes = 2 * k.numel() * k.element_size()
        for backend, context in sdpa_backends():
            label = f"b{batch} h{HEADS} L{keys} d{HEAD_DIM} {backend}"
            try:
                fn = lambda: F.scaled_dot_product_attention(q, k, v)
                if context is None:
                    us = median_us(fn, batches=9, per_batch=10)
                else:
                    with context():
                        us = median_us(fn, batches=9, per_batch=10)
                tbs = kv_bytes / (us * 1e-6) / 1e12
                report("flash_decoding", label, us=us, tbs=tbs, pct_copy=100 * tbs / copy_tbs)
            except Exception as e:  # a backend that cannot run one query token says why
                skipped("flash_decoding", label, e)
        del q, k, v
        torch.cuda.empty_cache()


def block_pattern(blocks):
    """Per block row: the diagonal plus (blocks + 2) // 4 - 1 others drawn without repeats."""
    rng = random.Random(18)
    kept = torch.zeros(blocks, blocks, dtype=torch.bool)
    per_row = max(1, (blocks + 2) // 4)
    for r in range(blocks):
        kept[r, r] = True
        for c in rng.sample([c for c in range(blocks) if c != r], per_row - 1):
            kept[r, c] = True
    return kept


def run_block_sparse():
    seq, block = 8192, 128
    blocks = seq // block
    kept = block_pattern(blocks).cuda()
    flops = 4 * HEAD_DIM * HEADS * int(kept.sum()) * block * block
    shape = f"h{HEADS} s{seq} d{HEAD_DIM} density {kept.float().mean().item():.3f}"
    q = torch.randn(1, HEADS, seq, HEAD_DIM, dtype=torch.bfloat16, device="cuda") * 4
    k, v = (torch.rand(1, HEADS, seq, HEAD_DIM, device="cuda").mul_(2).sub_(1).to(torch.bfloat16) for _ in range(2))
    dense_mask = kept.repeat_interleave(block, 0).repeat_interleave(block, 1)  # [seq, seq] bool
    try:
        fn = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=dense_mask)
        report("block_sparse", f"{shape} sdpa dense bool mask", **timed(fn, flops, sustained=True, batches=5, per_batch=5))
    except Exception as e:
        skipped("block_sparse", f"{shape} sdpa dense bool mask", e)
    del dense_mask
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        def keep(b, h, q_idx, kv_idx):
            return kept[q_idx // block, kv_idx // block]

        mask = create_block_mask(keep, B=None, H=None, Q_LEN=seq, KV_LEN=seq, BLOCK_SIZE=block)
        flex = torch.compile(flex_attention)
        fn = lambda: flex(q, k, v, block_mask=mask)
        report("block_sparse", f"{shape} flex_attention (compiled)", **timed(fn, flops, sustained=True, batches=5, per_batch=5))
    except Exception as e:  # an older PyTorch has no FlexAttention
        skipped("block_sparse", f"{shape} flex_attention (compiled)", e)


def run_speculative_verify():
    batch, cached, draft = 16, 4096, 8
    keys = cached + draft
    q = torch.randn(batch, HEADS, draft, HEAD_DIM, dtype=torch.bfloat16, device="cuda") * 4
    k, v = (torch.rand(batch, HEADS, keys, HEAD_DIM, device="cuda").mul_(2).sub_(1).to(torch.bfloat16) for _ in range(2))
    # Draft i sees the cache and drafts 0..i: keys j <= cached + i.
    mask = torch.arange(keys, device="cuda")[None, :] <= (cached + torch.arange(draft, device="cuda"))[:, None]
    label = f"b{batch} h{HEADS} cached {cached} + {draft} drafts d{HEAD_DIM}"
    try:
        us = median_us(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), batches=9, per_batch=10)
        report("speculative_verify", f"{label} sdpa", us=us, tokens_per_s=batch * draft / (us * 1e-6))
    except Exception as e:
        skipped("speculative_verify", f"{label} sdpa", e)


def main():
    peer_main(__doc__, {"flash_decoding": run_flash_decoding, "block_sparse": lambda copy: run_block_sparse(),
                        "speculative_verify": lambda copy: run_speculative_verify()})


if __name__ == "__main__":
    sys.exit(main())
