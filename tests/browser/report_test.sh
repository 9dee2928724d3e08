#!/usr/bin/env bash
# The HTML report in a real browser (docs/reports.md): headless Chromium renders a report made
# from checked-in fixtures, takes a screenshot and dumps the DOM it built. The DOM must hold as
# many speedup rows and roofline points as the file was written with (a mangled SVG loses
# them), at least one of each, and Chromium's console must show no error.
# Usage: report_test.sh <bench executable> <fixtures dir> <output dir>. Exit 77 (skipped) when
# no Chromium is installed: `./bench test` installs chromium-headless-shell where it can.
set -uo pipefail
bench="$1" fixtures="$2" out="$3"
browser="${BENCH_CHROMIUM:-}"
for candidate in chromium-headless-shell chromium chromium-browser; do
  [ -n "$browser" ] && break
  browser="$(command -v "$candidate" || true)"
done
# Debian puts the headless shell under /usr/lib/chromium.
[ -z "$browser" ] && [ -x /usr/lib/chromium/chromium-headless-shell ] && browser=/usr/lib/chromium/chromium-headless-shell
if [ -z "$browser" ]; then
  echo "SKIPPED: no Chromium (apt-get install chromium-headless-shell)"
  exit 77
fi
mkdir -p "$out"
fail() { echo "FAILED: $*"; exit 1; }

# Two real H100 runs (trimmed: the examples whose cost models place them on the roofline, and
# two that cannot be placed), so the history is drawn too; the H100's ceilings as of 2026-11-23.
"$bench" report "$fixtures/report/h100_run_a.json" "$fixtures/report/h100_run_b.json" \
  --expectations-dir "$fixtures/report" --html "$out/report.html" >/dev/null || fail "bench report"
flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$out/profile"
       --enable-logging=stderr --v=0)
timeout 120 "$browser" "${flags[@]}" --window-size=1100,4000 --screenshot="$out/report.png" \
  "file://$out/report.html" >"$out/screenshot.log" 2>&1 || fail "screenshot: $(tail -3 "$out/screenshot.log")"
[ -s "$out/report.png" ] || fail "no screenshot written"
timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$out/report.html" >"$out/dom.html" 2>"$out/dom.log" \
  || fail "dump-dom: $(tail -3 "$out/dom.log")"

status=0
for mark in 'class="speedup-row"' 'class="point"' 'class="roof"'; do
  written=$(grep -o "$mark" "$out/report.html" | wc -l)
  rendered=$(grep -o "$mark" "$out/dom.html" | wc -l)
  echo "$mark: $written written, $rendered in the DOM"
  [ "$written" -gt 0 ] || { echo "FAILED: the report has no $mark"; status=1; }
  [ "$written" = "$rendered" ] || { echo "FAILED: the DOM lost $mark marks"; status=1; }
done
# Chromium logs page console messages as "CONSOLE(...)" or ":CONSOLE:" lines.
if grep -hiE "console.*(error|uncaught)" "$out/screenshot.log" "$out/dom.log"; then
  echo "FAILED: console errors above"
  status=1
fi
echo "screenshot: $out/report.png"
exit $status
