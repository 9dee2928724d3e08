#!/usr/bin/env bash
# One-GPU tests side by side (cmake/BenchGpuTest.cmake): scripts/gpu_slots.sh writes a slot per
# GPU, scripts/on_ctest_gpu.sh puts each test on the GPU of its slot, and ctest, given the spec,
# hands two tests that run at once two different GPUs. No GPU needed: nvidia-smi is faked and the
# "tests" print the CUDA_VISIBLE_DEVICES they were given.
#   gpu_slots_test.sh <source dir> <ctest>
set -uo pipefail
src=$1 ctest=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() {  # check <what> <expected> <actual>
  if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: expected '$2', got '$3'"; failures=$((failures + 1)); fi
}
slots() { grep -o '"id": "[0-9]*"' "$1" | wc -l; }

# The slot count: CUDA_VISIBLE_DEVICES's entries, else nvidia-smi's GPUs, at least one.
mkdir -p "$work/bin"
printf '#!/bin/sh\nfor i in 0 1 2 3; do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-$i)"; done\n' >"$work/bin/nvidia-smi"
chmod +x "$work/bin/nvidia-smi"
( unset CUDA_VISIBLE_DEVICES; PATH="$work/bin:$PATH" bash "$src/scripts/gpu_slots.sh" "$work/four.json" >/dev/null )
check "four GPUs listed: four slots" 4 "$(slots "$work/four.json")"
CUDA_VISIBLE_DEVICES=3,1 PATH="$work/bin:$PATH" bash "$src/scripts/gpu_slots.sh" "$work/two.json" >/dev/null
check "CUDA_VISIBLE_DEVICES=3,1: two slots" 2 "$(slots "$work/two.json")"
# No GPU: an nvidia-smi that fails, as it does without a driver (a PATH without one would still
# find the real one on a GPU machine, in /usr/bin).
mkdir -p "$work/nogpu"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2\nexit 9\n' >"$work/nogpu/nvidia-smi"
chmod +x "$work/nogpu/nvidia-smi"
( unset CUDA_VISIBLE_DEVICES; PATH="$work/nogpu:$PATH" bash "$src/scripts/gpu_slots.sh" "$work/none.json" >/dev/null )
check "nvidia-smi finds no GPU: one slot" 1 "$(slots "$work/none.json")"
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$work/four.json" || { echo "FAIL: the spec is not JSON"; failures=$((failures + 1)); }

# A slot's id to the device the test sees.
launch() { bash "$src/scripts/on_ctest_gpu.sh" sh -c 'echo "${CUDA_VISIBLE_DEVICES-unset}"'; }
check "slot 2, nothing set: GPU 2" 2 "$(unset CUDA_VISIBLE_DEVICES; CTEST_RESOURCE_GROUP_0_GPUS=id:2,slots:1 launch)"
check "slot 1 of CUDA_VISIBLE_DEVICES=3,1: GPU 1" 1 "$(CUDA_VISIBLE_DEVICES=3,1 CTEST_RESOURCE_GROUP_0_GPUS=id:1,slots:1 launch)"
check "slot 0 of CUDA_VISIBLE_DEVICES=3,1: GPU 3" 3 "$(CUDA_VISIBLE_DEVICES=3,1 CTEST_RESOURCE_GROUP_0_GPUS=id:0,slots:1 launch)"
check "no slot (run by hand): unchanged" unset "$(unset CUDA_VISIBLE_DEVICES CTEST_RESOURCE_GROUP_0_GPUS; launch)"
check "no GPU visible: left empty" "" "$(CUDA_VISIBLE_DEVICES= CTEST_RESOURCE_GROUP_0_GPUS=id:0,slots:1 launch)"
CUDA_VISIBLE_DEVICES=0 CTEST_RESOURCE_GROUP_0_GPUS=id:1,slots:1 launch >/dev/null 2>"$work/err"
check "a slot past CUDA_VISIBLE_DEVICES: refused" 1 "$(grep -c 'has 1' "$work/err")"

# ctest itself: two one-GPU tests that overlap in time get different GPUs from a two-slot spec,
# and the same GPU, one after the other, from the build's one-slot default.
mkdir -p "$work/ctest"
for t in a b; do
  cat >>"$work/ctest/CTestTestfile.cmake" <<CMAKE
add_test($t bash "$src/scripts/on_ctest_gpu.sh" sh -c "echo \\\$CUDA_VISIBLE_DEVICES >$work/ctest/$t.gpu; sleep 1")
set_tests_properties($t PROPERTIES RESOURCE_GROUPS "gpus:1")
CMAKE
done
run_two() {  # run_two <slots file>: the GPUs the two tests saw, sorted
  rm -f "$work/ctest/"*.gpu
  ( unset CUDA_VISIBLE_DEVICES; cd "$work/ctest" && "$ctest" -j2 --resource-spec-file "$1" >"$work/ctest.log" 2>&1 ) ||
    { echo "FAIL: ctest:"; cat "$work/ctest.log"; failures=$((failures + 1)); }
  cat "$work/ctest/"*.gpu 2>/dev/null | sort | tr '\n' ' '
}
check "ctest -j2, two slots: two GPUs" "0 1 " "$(run_two "$work/two.json")"
check "ctest -j2, one slot: one GPU" "0 0 " "$(run_two "$work/none.json")"

[ "$failures" = 0 ] && echo "gpu_slots: all checks passed" || { echo "gpu_slots: $failures failed"; exit 1; }
