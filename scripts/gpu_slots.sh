#!/usr/bin/env bash
# Writes a ctest resource spec with one "gpus" slot per GPU this process may use, for
# `ctest --resource-spec-file` (cmake/BenchGpuTest.cmake):  gpu_slots.sh <file>
# The GPUs are CUDA_VISIBLE_DEVICES's entries where it is set, else the ones nvidia-smi lists.
# At least one slot, so that on a machine without a GPU the GPU tests still run (and skip).
set -euo pipefail
out=${1:?usage: gpu_slots.sh <file>}
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
  IFS=, read -ra visible <<<"$CUDA_VISIBLE_DEVICES"
  count=${#visible[@]}
else
  count=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
[ "${count:-0}" -ge 1 ] || count=1
slots=""
for ((i = 0; i < count; i++)); do slots+="${slots:+, }{\"id\": \"$i\"}"; done
printf '{"version": {"major": 1, "minor": 0}, "local": [{"gpus": [%s]}]}\n' "$slots" >"$out"
echo "$count"
