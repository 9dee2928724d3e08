#!/bin/bash
# ch09 device session: build, SASS check (HGMMA), run each example in its own process.
# Usage: chapters/ch09/.device_run.sh "<examples>"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake --preset device >/dev/null && cmake --build --preset device --target ch09 2>&1 | grep -E 'error|warning' | head -20
B=build/device/chapters/ch09/ch09
echo "build done at $(el) s"; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
if command -v cuobjdump >/dev/null; then
  echo "HGMMA in SASS: $(cuobjdump -sass $B | grep -c HGMMA)  HMMA: $(cuobjdump -sass $B | grep -c 'HMMA')"
  cuobjdump -res-usage $B 2>&1 | grep -A1 -E "Function .*(gemm|tiled|fused|l2norm)" | grep -oE "Function [^ ]*|REG:[0-9]+|STACK:[0-9]+|SHARED:[0-9]+" | paste - - - - > $OUT/res.txt
fi
for ex in $1; do
  if [ $(el) -gt ${BUDGET:-390} ]; then echo "SKIP $ex (time)"; continue; fi
  timeout ${EXT:-80} $B --benchmark_filter="^ch09/$ex/" ${EXTRA} 2>&1 | tee -a $OUT/run.txt | grep -E "^ch09|FAILED|SKIPPED|rror" | sed -E 's/ +/ /g' | cut -c1-260
  echo "$ex rc=${PIPESTATUS[0]} at $(el) s"
done
echo "total $(el) s"
