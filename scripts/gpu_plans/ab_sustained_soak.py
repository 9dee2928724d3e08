# A plan for scripts/gpu_jobs.py: ch16's flash attention under three sustained rules, each run
# twice, on one or two GPUs (each runs every arm; one GPU: one queue, the arms taking turns):
#   rule    the default: 1 s soak, then 1% noise after 1 s, else the 3 s timeout;
#   w1s2    `--bench_sustained_soak=2 --bench_sustained_window=1`: samples at 2-3 s of load, where
#           the rule's middle sample is (its samples span 1-4 s);
#   w1s15   `--bench_sustained_soak=1.5 --bench_sustained_window=1`.
# A 1 s window after the 1 s soak read 0.8% faster than the rule on a 4x H200 (2026-11-28: ch16
# README). Read each arm against the rule with
#
#   python3 scripts/ab_compare.py --a jobs/r/res_soak_rule_*.json --b jobs/r/res_soak_w1s2_*.json \
#       --a-name rule --b-name w1s2 --variants optimized,wgmma_chained
#
# An arm may become the default only if every optimized median moves by less than the larger
# side's run-to-run spread; its phases say what it saves (issue 39's compare time).
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/ab_sustained_soak.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
FLASH = "--chapter ch16 --example flash_attention"
# min_s: a whole run's seconds on a 4x H200 (rule 186-194 s; the others estimated from the 1 s
# window's 125-131 s plus the longer soak's 0.5-1 s a case over 42 cases), so none is started only
# to be cut off.
ARMS = {"rule": ("", 195), "w1s2": (" -- --bench_sustained_soak=2 --bench_sustained_window=1", 175),
        "w1s15": (" -- --bench_sustained_soak=1.5 --bench_sustained_window=1", 155)}
# Run 1 of every arm, then run 2 in the reverse order, so no arm always follows the same one. At
# most two queues, so that every GPU used runs every arm (a GPU's own pace, which can differ by
# several percent beside busy neighbours, must not pose as an arm's effect); other GPUs idle.
order = [(arm, 1) for arm in ARMS] + [(arm, 2) for arm in reversed(list(ARMS))]
used = min(gpus, 2)
queues = {str(g): [] for g in range(used)}
for i, (arm, run) in enumerate(order):
    extra, min_s = ARMS[arm]
    queues[str(i % used)].append(compare(f"soak_{arm}_{run}", FLASH + extra, min_s))
STAGES = [queues]
