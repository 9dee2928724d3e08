#!/usr/bin/env bash
# One call on the GPU machine: first the README's two commands verbatim, as a new user runs them
# on a fresh machine (`./bench compare --chapter ch07`, then `./bench test`: the launcher's
# build/default); then build with the `device` preset on all cores (build/device), run ctest with
# the GPU labels, run `bench compare` for the chapters named, and leave logs and reports in $OUT.
#
#   scripts/gpu_session.sh [--chapters "ch07 ch02"] [--all] [--examples "a,b"] [--repeats N]
#                          [--update] [--update-runs N]
#                          [--calibrate] [--calibrate-args "..."] [--targets "..."]
#                          [--ctest-labels REGEX] [--no-ctest] [--extra "compare args"]
#                          [--no-readme] [--preset default|device] [--sanitize "ch07 ch02"]
#                          [--peers "scripts/peers/torch_rowwise.py"] [--html]
#                          [--profile "ch08/occupancy_tuning/baseline ..."] [--metrics "a,b"]
#                          [--mpi "1073741824 67108868"] [--mpi-sweep] [--sass "ch10 ch16"]
#                          [--nccl-sweep "default;NCCL_PROTO=Simple;NCCL_MIN_NCHANNELS=32"]
#
# --all runs `bench compare --all` (every chapter in one report) instead of --chapters.
# --examples "a,b" adds `--example a,b` to every `bench compare` and `bench sanitize` the session
# runs: only those examples (bare names or chNN/name, comma-separated). A name that matches no
# example of the chapter compared is an error, and each of --chapters is a compare of its own: for
# examples of several chapters, use --all --examples "ch16/a,ch10/b". It exists because a whole
# chapter's update no longer fits in one device call: `--update --update-runs 3 --repeats 2` of
# ch16 (12 examples, ~165 s a run on an H100) was still in its third run when a 450 s limit
# stopped it, and a call ends at 600 s. Update such a chapter a few examples per call (the update
# keeps every other entry), e.g.
#   scripts/gpu_session.sh --no-readme --chapters ch16 --update --update-runs 3 \
#     --examples flash_attention --extra "--axis d=64"
# (--extra "--sweep" runs every point of the examples' axes: the HTML report's curves.)
# --sanitize runs `bench sanitize --chapter C --timeout 240` for each chapter named, last (a hung
# run is killed at 240 s and reported, so it cannot take the rest of the device call with it).
# --peers runs each named peer script (PyTorch timings of what a user would pick instead) after
# the compares, in the same session, with --json session/peer_<name>.json. The peers of
# sustained-mode examples also take a sustained figure (about 2 s a row, a minute for
# torch_inference.py's sdpa): count it in the call's time.
# --profile runs `bench profile CASE --set basic` (ncu) for each case named, with --metrics added to
# the basic set, and prints those metrics from each report into the summary.
# --mpi runs ch04's MPI form on every GPU of the machine (mpirun -np <GPU count>) at each byte
# count named, then once with the last rank planted wrong (it must report FAILED naming it), and
# the one-shot kernel alone (`--algorithm one_shot`) at 256 KiB + 4 B, clean then with the last
# rank planted (NCCL's runs above 4 MiB leave it out).
# --mpi-sweep runs it once more over ch04's sweep sizes (4 KiB to 1 GiB, `ch04_mpi --sweep`: NCCL
# at every size, the one-shot up to 4 MiB), into session/mpi_sweep.json. When the session has
# ch04's compare results and the MPI sweep or the PyTorch peer (torch_allreduce.py),
# scripts/ch04_busbw_table.py puts them side by side in one table, session/ch04_busbw.md (and the
# summary). On a machine of several GPUs the summary starts with `nvidia-smi topo -m`: how the
# GPUs are joined decides what busbw can reach.
# --nccl-sweep runs `bench compare --chapter ch04 --example allreduce` once per setting named
# (';'-separated; each a list of VAR=value for NCCL, or "default"), and puts the 1 GiB busbw of
# both variants and the channel and protocol lines NCCL printed into the
# summary: where NCCL's all-reduce leaves the link's bandwidth, before any setting is adopted in
# code (ncclConfig_t) and said so in the chapter README. NCCL_NVLS_ENABLE stays 0 in every run.
# The example's communicator asks for 32 blocks (ch04::kBandwidthCtas, minCTAs = maxCTAs); of
# the variables, NCCL_MIN_CTAS and NCCL_MAX_CTAS override that (NCCL's documentation); what
# NCCL_MIN_NCHANNELS does beside it has not been tried. The channel count and the algorithm and
# protocol NCCL chose come from a direct run of the variant with NCCL_DEBUG=INFO.
# --sass runs scripts/sass_summary.py on each chapter binary named (build/<preset>/chapters/C/C):
# per kernel, the HGMMA (shape, A from registers or shared memory), TMA (UTMALDG/UTMASTG, with
# their modifiers), SYNCS, USETMAXREG, mma.sync and local-memory (LDL/STL) counts a README quotes
# as its SASS evidence; a markdown table per chapter in session/sass_<C>.md.
# --html adds `--html session/compare_<ch>_<i>.html` to every compare (the HTML report).
# --preset picks the build the session uses after the README's commands: `default` (the
# default) reuses build/default, which `./bench test` has just built and tested with every
# label, so the session neither rebuilds nor reruns ctest unless --ctest-labels asks; `device`
# builds build/device (sm_90a) and runs ctest with the GPU labels as before.
#
# --no-readme skips the README's commands (a rerun on a warm machine, whose build/default the
# first call built and tested: no ctest then either, unless --ctest-labels); their exit codes and
# durations go to the summary, their output to session/readme_compare_ch07.log and
# session/readme_test.log.
# --calibrate measures the ceilings first (bench calibrate, with --calibrate-args such as
# "--only tf32,bf16 --repetitions 3"), so reports show % of ceiling.
# --update accepts the first compare run of each chapter into expectations/<hardware_key>.json;
# the later repeats score against what it wrote (the run-to-run check). Keep the update and its
# rerun in one call: every device call re-sends the working tree, so a later call reads the
# expectations as they are here, not as the update left them on the device (session.tar.gz
# carries the updated files back; copy them into the tree). On a machine of several GPUs the
# one-GPU examples' entries go to the one-GPU file (docs/expectations.md). --update-runs N makes
# that first run `--repetitions N` (host-bound examples need N >= 3 to be accepted).
#
# The device's copy of .git is the one the session started from, so results would record that
# commit plus "-dirty": write the real one into the command, as the caller knows it, e.g.
#   BENCH_GIT_SHA=3c54a03a1b2c scripts/gpu_session.sh --all   (the chapter binaries read it when they
#   run, over the commit CMake took at configure time: harness/src/build_info.cpp.in)
# On a machine of several GPUs, after this script's first call (its README commands build
# build/default), scripts/gpu_jobs.py runs a plan's compares and peers as one queue per GPU
# against one deadline (scripts/gpu_plans/: the whole suite, the sustained re-records, an A/B).
#
# Everything lands in $OUT/session/ and is packed into $OUT/session.tar.gz (the device tool
# returns at most 8 files); the summary is printed last.
set -uo pipefail
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on the lent machines
cd "$(dirname "$0")/.."

chapters="" examples="" repeats=1 update="" update_runs=1 targets="" labels="gpu|chapter|unit|tools" run_ctest=1 extra=""
mpi_bytes="" mpi_sweep=0 nccl_sweep=""
calibrate=0 calibrate_args="" readme=1 preset=default all=0 sanitize="" sass="" labels_given=0 peers="" html=0 profile="" metrics=""
while [ $# -gt 0 ]; do
  case "$1" in
    --chapters) chapters="$2"; shift 2 ;;
    --examples) examples="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --update) update="--update-expectations"; shift ;;
    --update-runs) update_runs="$2"; shift 2 ;;
    --calibrate) calibrate=1; shift ;;
    --calibrate-args) calibrate_args="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --ctest-labels) labels="$2"; labels_given=1; shift 2 ;;
    --preset) preset="$2"; shift 2 ;;
    --all) all=1; shift ;;
    --sanitize) sanitize="$2"; shift 2 ;;
    --peers) peers="$2"; shift 2 ;;
    --html) html=1; shift ;;
    --profile) profile="$2"; shift 2 ;;
    --metrics) metrics="$2"; shift 2 ;;
    --mpi) mpi_bytes="$2"; shift 2 ;;
    --mpi-sweep) mpi_sweep=1; shift ;;
    --nccl-sweep) nccl_sweep="$2"; shift 2 ;;
    --sass) sass="$2"; shift 2 ;;
    --no-ctest) run_ctest=0; shift ;;
    --extra) extra="$2"; shift 2 ;;
    --no-readme) readme=0; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

out="${OUT:-$PWD/gpu-session}/session"
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
# Pack what there is, also when a time limit stops the session (timeout sends TERM): the device
# tool returns only a few files, and an expectations update lives only in this machine's tree.
pack() {
  cp -r expectations "$out/" 2>/dev/null
  tar -czf "${OUT:-$PWD/gpu-session}/session.tar.gz" -C "$out/.." session
  cp "$summary" "${OUT:-$PWD/gpu-session}/summary.txt"
}
child=""
trap 'note "stopped by a signal: packing what there is"; [ -n "$child" ] && kill "$child" 2>/dev/null; pack; exit 124' TERM INT

# The README's two commands, verbatim, before anything else.
readme_run() {  # readme_run <log file> <command...>
  local log="$out/$1" t rc
  shift
  t=$(date +%s)
  "$@" >"$log" 2>&1
  rc=$?
  note "readme: $*: exit $rc, $(( $(date +%s) - t )) s (output: session/$(basename "$log"))"
}
if [ "$readme" = 1 ]; then
  readme_run readme_compare_ch07.log ./bench compare --chapter ch07
  tail -n 25 "$out/readme_compare_ch07.log" >>"$summary"
  readme_run readme_test.log ./bench test
  grep -E "tests passed|tests failed|\(Failed\)|\*\*\*|Not Run" "$out/readme_test.log" | head -20 | tee -a "$summary"
fi

note "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader)"
[ "$(nvidia-smi -L | grep -c '^GPU')" -gt 1 ] && nvidia-smi topo -m 2>&1 | tee -a "$summary"
start=$(date +%s)
# build/default was just built and tested in full by `./bench test` (this call, or the call
# before it on a warm machine, with --no-readme): reuse it as it is unless --ctest-labels asks.
if [ "$preset" = default ] && [ "$labels_given" = 0 ]; then run_ctest=0; fi
cmake --preset "$preset" >"$out/configure.log" 2>&1 || { note "configure FAILED"; tail -30 "$out/configure.log"; }
build_args=(--build --preset "$preset")
[ -n "$targets" ] && build_args+=(--target $targets)
cmake "${build_args[@]}" -j "$(nproc)" >"$out/build.log" 2>&1 || { note "build FAILED"; grep -E "error|FAILED" "$out/build.log" | head -40; }
note "build ($preset): $(( $(date +%s) - start )) s"

if [ "$run_ctest" = 1 ]; then
  t=$(date +%s)
  # One-GPU tests side by side, one per GPU (cmake/BenchGpuTest.cmake), as `./bench test` runs them.
  bash scripts/gpu_slots.sh "build/$preset/gpu_slots_found.json" >/dev/null
  ctest --preset "$preset" -L "$labels" --timeout 900 -j "$(nproc)" \
        --resource-spec-file "build/$preset/gpu_slots_found.json" >"$out/ctest.log" 2>&1
  note "ctest ($labels): $(( $(date +%s) - t )) s: $(grep -E 'tests passed|tests failed' "$out/ctest.log")"
  grep -E "Failed|\*\*\*|Not Run|Skipped" "$out/ctest.log" | head -20 | tee -a "$summary"
fi
# The timing tests print their measured figures: keep them in the summary.
[ -x "build/$preset/tests/gpu/gpu_tests" ] && "build/$preset/tests/gpu/gpu_tests" \
  --gtest_filter='*Spin*:*Row8*:*Row14*:*Sustained*:Memoisation*' 2>&1 | grep -E "median|cold|A/A|sustained|OK|FAILED" >>"$summary"

bench=build/$preset/tools/bench
if [ "$calibrate" = 1 ]; then
  t=$(date +%s)
  $bench calibrate $calibrate_args >"$out/calibrate.log" 2>&1
  note "calibrate: exit $?, $(( $(date +%s) - t )) s"
  cat "$out/calibrate.log" >>"$summary"
fi
[ "$all" = 1 ] && chapters="all"
for ch in $chapters; do
  which="--chapter $ch"
  [ "$ch" = all ] && which="--all"
  for i in $(seq 1 "$repeats"); do
    t=$(date +%s)
    flags=""
    [ "$i" = 1 ] && [ -n "$update" ] && flags="$update --repetitions $update_runs"
    [ "$html" = 1 ] && flags="$flags --html $out/compare_${ch}_$i.html"
    [ -n "$examples" ] && flags="$flags --example $examples"
    $bench compare $which --json "$out/compare_${ch}_$i.json" --markdown "$out/compare_${ch}_$i.md" \
      --save-results "$out/results_${ch}_$i.json" \
      $flags $extra >"$out/compare_${ch}_$i.log" 2>&1 &
    child=$!
    wait $child  # in the background, so a TERM is handled now, not after this compare ends
    rc=$?
    note "compare $ch run $i: exit $rc, $(( $(date +%s) - t )) s"
    cat "$out/compare_${ch}_$i.log" >>"$summary"
    [ -n "$update" ] && cp -r expectations "$out/"  # the update so far, kept at once
  done
done
for script in $peers; do
  t=$(date +%s)
  name=$(basename "$script" .py)
  python3 "$script" --json "$out/peer_$name.json" >"$out/peer_$name.log" 2>&1
  note "peer $name: exit $?, $(( $(date +%s) - t )) s"
  grep -v Warning "$out/peer_$name.log" | tail -n 40 >>"$summary"
done
gpus=$(nvidia-smi -L | grep -c '^GPU')
mpi=(mpirun --allow-run-as-root -np "$gpus" -x NCCL_NVLS_ENABLE=0 "build/$preset/chapters/ch04/ch04_mpi")
if [ -n "$mpi_bytes" ]; then
  for b in $mpi_bytes; do
    "${mpi[@]}" --bytes "$b" >"$out/mpi_$b.log" 2>&1
    note "mpirun -np $gpus ch04_mpi --bytes $b: exit $?: $(grep 'ch04_mpi allreduce' "$out/mpi_$b.log")"
  done
  b=${mpi_bytes%% *}
  "${mpi[@]}" --bytes "$b" --plant-wrong-rank $((gpus - 1)) >"$out/mpi_planted.log" 2>&1
  note "mpirun -np $gpus ch04_mpi --bytes $b --plant-wrong-rank $((gpus - 1)): exit $?: $(grep 'ch04_mpi allreduce' "$out/mpi_planted.log")"
  one_shot=("${mpi[@]}" --algorithm one_shot --bytes 262148)
  "${one_shot[@]}" >"$out/mpi_one_shot.log" 2>&1
  note "mpirun -np $gpus ch04_mpi --algorithm one_shot --bytes 262148: exit $?: $(grep 'ch04_mpi allreduce' "$out/mpi_one_shot.log")"
  "${one_shot[@]}" --plant-wrong-rank $((gpus - 1)) >"$out/mpi_one_shot_planted.log" 2>&1
  note "mpirun -np $gpus ch04_mpi --algorithm one_shot --bytes 262148 --plant-wrong-rank $((gpus - 1)): exit $?: $(grep 'ch04_mpi allreduce' "$out/mpi_one_shot_planted.log")"
fi
if [ "$mpi_sweep" = 1 ]; then
  t=$(date +%s)
  "${mpi[@]}" --sweep --json "$out/mpi_sweep.json" >"$out/mpi_sweep.log" 2>&1
  note "mpirun -np $gpus ch04_mpi --sweep: exit $?, $(( $(date +%s) - t )) s"
  grep -E 'ch04_mpi allreduce' "$out/mpi_sweep.log" | tee -a "$summary"
fi
table_args=()
for f in "$out"/results_ch04_*.json; do [ -f "$f" ] && table_args+=(--results "$f"); done
[ -f "$out/mpi_sweep.json" ] && table_args+=(--mpi "$out/mpi_sweep.json")
[ -f "$out/peer_torch_allreduce.json" ] && table_args+=(--torch "$out/peer_torch_allreduce.json")
if [ ${#table_args[@]} -gt 2 ]; then  # our sweep and at least one thing to set beside it
  python3 scripts/ch04_busbw_table.py "${table_args[@]}" >"$out/ch04_busbw.md" 2>&1
  note "ch04 busbw table: exit $? (session/ch04_busbw.md)"
  cat "$out/ch04_busbw.md" >>"$summary"
fi
if [ -n "$nccl_sweep" ]; then
  i=0
  IFS=';' read -ra nccl_settings <<<"$nccl_sweep"
  for setting in "${nccl_settings[@]}"; do
    i=$((i + 1))
    vars=()
    [ "$setting" != default ] && read -ra vars <<<"$setting"
    log="$out/nccl_sweep_$i.log"
    env "${vars[@]}" NCCL_NVLS_ENABLE=0 \
      $bench compare --chapter ch04 --example allreduce --json "$out/nccl_sweep_$i.json" >"$log" 2>&1
    note "nccl sweep [$setting]: exit $?: $(grep -E 'busbw_gbps_1GiB' "$log" | head -1)"
    grep -E "ch04/allreduce +optimized" "$log" | head -1 | tee -a "$summary"
    # bench compare keeps a chapter's stderr to itself (a crash's last lines only), so NCCL's own
    # account of its choice comes from one direct run of the optimized variant.
    env "${vars[@]}" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING NCCL_NVLS_ENABLE=0 \
      "build/$preset/chapters/ch04/ch04" "--benchmark_filter=^ch04/allreduce/optimized/" >"$out/nccl_sweep_${i}_nccl.log" 2>&1
    grep -E "coll channels|Algo [A-Z]+ proto" "$out/nccl_sweep_${i}_nccl.log" | sed 's/.*NCCL INFO//' | sort | uniq -c |
      sort -rn | head -4 | tee -a "$summary"
  done
fi
# The tensor-pipe metric names differ by GPU and ncu version (Hopper's wgmma is "gmma"): list
# them once, so a later --metrics can name the right ones.
if [ -n "$profile" ]; then
  mkdir -p "$out/profile"
  ncu --query-metrics 2>/dev/null | grep -Ei 'gmma|pipe_tensor' >"$out/profile/tensor_metrics.txt"
  note "ncu tensor-pipe metrics: $(wc -l <"$out/profile/tensor_metrics.txt") (session/profile/tensor_metrics.txt)"
fi
for case in $profile; do
  report="$out/profile/${case//\//.}"
  mkdir -p "$out/profile"
  $bench profile "$case" --set basic -o "$report" ${metrics:+-- --metrics "$metrics"} >"$report.log" 2>&1
  note "profile $case: exit $?"
  ncu --import "$report.ncu-rep" --page raw --csv ${metrics:+--metrics "$metrics"} 2>&1 | tail -n 3 | tee -a "$summary"
done
for ch in $sass; do
  python3 scripts/sass_summary.py --markdown "build/$preset/chapters/$ch/$ch" >"$out/sass_$ch.md" 2>&1
  note "sass $ch: exit $? (session/sass_$ch.md)"
  cat "$out/sass_$ch.md" >>"$summary"
done
for ch in $sanitize; do
  t=$(date +%s)
  $bench sanitize --chapter "$ch" --timeout 240 ${examples:+--example "$examples"} >"$out/sanitize_$ch.log" 2>&1
  note "sanitize $ch: exit $?, $(( $(date +%s) - t )) s"
  cat "$out/sanitize_$ch.log" >>"$summary"
done
pack
echo "=================== summary"
cat "$summary"
