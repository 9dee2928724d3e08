#!/usr/bin/env bash
# Runs a one-GPU ctest test on the GPU ctest gave it (cmake/BenchGpuTest.cmake):
#   on_ctest_gpu.sh <command> [args...]
# ctest names the slot in CTEST_RESOURCE_GROUP_0_GPUS ("id:2,slots:1"). The id counts the GPUs
# this process may see: the id-th entry of CUDA_VISIBLE_DEVICES where the caller set one, else the
# id-th GPU of the machine. Without a slot (the command run by hand), or with no GPU visible,
# nothing changes.
set -euo pipefail
slot=${CTEST_RESOURCE_GROUP_0_GPUS:-}
if [ -n "$slot" ]; then
  id=${slot#id:}
  id=${id%%,*}
  if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    IFS=, read -ra visible <<<"$CUDA_VISIBLE_DEVICES"
    [ "${#visible[@]}" -gt 0 ] || exec "$@"  # no GPU visible: the test reports skipped
    if [ "$id" -ge "${#visible[@]}" ]; then
      echo "on_ctest_gpu.sh: ctest gave GPU slot $id, but CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' has ${#visible[@]}" >&2
      exit 2
    fi
    id=${visible[$id]}
  fi
  export CUDA_VISIBLE_DEVICES=$id
fi
exec "$@"
