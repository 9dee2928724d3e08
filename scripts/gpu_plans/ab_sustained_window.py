# A plan for scripts/gpu_jobs.py: the A/B of `--bench_sustained_window=1` (a fixed 1 s window of
# the board's time) against the default sustained rule (1% noise after 1 s, else the 3 s timeout)
# on ch16's flash attention, A B B A over two GPUs (one GPU: A B A B in one queue). Read it with
#
#   python3 scripts/ab_compare.py --a jobs/r/res_ab_rule_*.json --b jobs/r/res_ab_window_*.json \
#       --a-name rule --b-name window1 --variants optimized,wgmma_chained
#
# The window may become the default only if every optimized median moves by less than the larger
# side's run-to-run spread, and the phases show what it saves (issue 39's compare time).
FLASH = "--chapter ch16 --example flash_attention"
rule = lambda i: compare(f"ab_rule_{i}", FLASH, 150)
window = lambda i: compare(f"ab_window_{i}", FLASH + " -- --bench_sustained_window=1", 100)
STAGES = ([{"0": [rule(1), window(1)], "1": [window(2), rule(2)]}] if gpus > 1
          else [{"0": [rule(1), window(1), rule(2), window(2)]}])
