#!/usr/bin/env bash
# The CUDA compiler launcher (CMAKE_CUDA_COMPILER_LAUNCHER, set in the top CMakeLists.txt): runs
# the compile it is given and fails it when ptxas says it serialised a kernel's wgmma
# instructions. ptxas reports that only as an info line ("(C7518) Potential Performance Loss:
# wgmma.mma_async instructions are serialized due to ..."), the build succeeds, and the kernel
# runs as if it had no asynchronous tensor-core pipeline: ch16's d64 attention ran 1.55x slower
# for a wgmma inside a branch (docs/writing-an-example.md). The compiler's output passes through
# unchanged; on a serialised kernel the object is removed, so the next build compiles it again.
#   wgmma_guard.sh <compiler> <arguments...>
log=$(mktemp "${TMPDIR:-/tmp}/wgmma_guard.XXXXXX") || exit 1
"$@" 2>"$log"
rc=$?
cat "$log" >&2
if [ "$rc" -eq 0 ] && grep -q "wgmma.mma_async instructions are serialized" "$log"; then
  object=""
  previous=""
  for arg in "$@"; do
    [ "$previous" = "-o" ] && object="$arg"
    previous="$arg"
  done
  [ -n "$object" ] && rm -f "$object"
  echo "wgmma_guard: ptxas serialised the wgmma of a kernel compiled into ${object:-this object} (above):" \
       "keep each wgmma and its wait out of branches the compiler cannot prove warpgroup-uniform" \
       "(docs/writing-an-example.md)" >&2
  rc=1
fi
rm -f "$log"
exit "$rc"
