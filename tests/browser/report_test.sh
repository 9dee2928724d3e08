#!/usr/bin/env bash
# The HTML report in a real browser (docs/reports.md): headless Chromium renders reports made
# from checked-in real runs of an H100 and an H200, takes a screenshot of each and dumps the
# DOM it built. Each page must keep every speedup row, roofline point and roof the file was
# written with, show no console error, and pass layout_check.js in Chromium's layout: every
# example of its runs present, no two labels overlapping or clipped, each ceiling named, the
# tables sorting by a header click, the page within an 800 px window. A copy of one page with
# each of those faults planted must fail every check, so the checks are shown able to fail.
# Usage: report_test.sh <bench executable> <fixtures dir> <output dir>. Exit 77 (skipped) when
# no Chromium is installed: `./bench test` installs chromium-headless-shell where it can.
set -uo pipefail
bench="$1" fixtures="$2" out="$3"
here="$(cd "$(dirname "$0")" && pwd)"
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
flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$out/profile"
       --enable-logging=stderr --v=0)
runs="$fixtures/report"
status=0

# The examples of results files as `var expected = {hardware_key: [examples]}`, for
# layout_check.js: every case's and crash's example under its run's GPU.
expected_examples() {
  for file; do
    gpu=$(grep -m1 -oE '"hardware_key": *"[^"]*"' "$file" | sed -E 's/.*"([^"]*)"$/\1/')
    grep -oE '"(name|example)": *"ch[0-9]+/[A-Za-z0-9_]+' "$file" | sed -E "s|.*\"|$gpu |"
  done | sort -u | awk '{ list[$1] = list[$1] (list[$1] ? "," : "") "\"" $2 "\"" }
    END { for (g in list) s = s (s ? "," : "") "\"" g "\":[" list[g] "]"; print "var expected = {" s "};" }'
}

# layout_check.js on a copy of PAGE (an .html under $out) at 800 px, the examples of FILES
# expected; prints its verdict, one line per check.
layout_verdict() {
  local page="$1"
  shift
  { grep -v '^</body></html>$' "$out/$page.html"
    printf '<script>\n%s\n' "$(expected_examples "$@")"; cat "$here/layout_check.js"; printf '</script>\n</body></html>\n'
  } >"$out/${page}_checked.html"
  timeout 120 "$browser" "${flags[@]}" --window-size=800,3000 --virtual-time-budget=5000 --dump-dom \
    "file://$out/${page}_checked.html" >"$out/${page}_checked_dom.html" 2>>"$out/dom.log" || fail "dump-dom ($page)"
  sed -n '/<pre id="layout-check">/,/<\/pre>/p' "$out/${page}_checked_dom.html" | sed 's/<[^>]*>//g'
}

# check_page NAME WIDTH FILES...: `bench report` of FILES as NAME.html, its screenshot at
# WIDTH px, its DOM against the file, and its layout verdict.
check_page() {
  local name="$1" width="$2"
  shift 2
  "$bench" report "$@" --expectations-dir "$runs" --html "$out/$name.html" >/dev/null || fail "bench report ($name)"
  timeout 120 "$browser" "${flags[@]}" --window-size="$width",4000 --screenshot="$out/$name.png" \
    "file://$out/$name.html" >>"$out/screenshot.log" 2>&1 || fail "screenshot ($name): $(tail -3 "$out/screenshot.log")"
  [ -s "$out/$name.png" ] || fail "no screenshot written ($name)"
  timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$out/$name.html" >"$out/$name.dom.html" 2>"$out/$name.dom.log" ||
    fail "dump-dom ($name): $(tail -3 "$out/$name.dom.log")"
  for mark in 'class="speedup-row"' 'class="point"' 'class="roof"'; do
    written=$(grep -o "$mark" "$out/$name.html" | wc -l)
    rendered=$(grep -o "$mark" "$out/$name.dom.html" | wc -l)
    echo "$name: $mark: $written written, $rendered in the DOM"
    [ "$written" -gt 0 ] || { echo "FAILED: $name has no $mark"; status=1; }
    [ "$written" = "$rendered" ] || { echo "FAILED: the DOM of $name lost $mark marks"; status=1; }
  done
  # Chromium logs page console messages as "CONSOLE(...)" or ":CONSOLE:" lines.
  if grep -hiE "console.*(error|uncaught)" "$out/$name.dom.log"; then
    echo "FAILED: $name: console errors above"
    status=1
  fi
  verdict=$(layout_verdict "$name" "$@")
  echo "$verdict" | sed "s/^/$name: /"
  [ -n "$verdict" ] || { echo "FAILED: $name: the layout check wrote no verdict"; status=1; }
  if echo "$verdict" | grep -vE '^[a-z]+=0 ?$' | grep -q .; then
    echo "FAILED: $name: layout check (above)"
    status=1
  fi
}

# Two real H100 runs of 2026-11-23 (trimmed to 7 examples: the ones whose cost models place them
# on the roofline, and two that cannot be placed), so the history is drawn too; the H100's
# ceilings as of then.
check_page h100_history 1100 "$runs/h100_run_a.json" "$runs/h100_run_b.json"
# Two chapters of one real H200 lease (2026-11-27, at 0b0b35e; trim.py kept 3 ch07 examples of a
# --sweep run and 5 of ch09's 11, with a ladder, a vendor rung, a SKIPPED point and a REGRESSED
# example) merged into one page, scored against that lease's H200 expectations (trimmed alike).
check_page h200 1100 "$runs/h200_ch07.json" "$runs/h200_ch09.json"
# The same H100 and H200 runs on one page: the side-by-side table, H100 | H200 columns per example
# (5 examples in both, the rest in one only).
check_page h100_h200 800 "$runs/h100_run_a.json" "$runs/h100_run_b.json" "$runs/h200_ch07.json" "$runs/h200_ch09.json"
# A real 4x H100 ch04 run beside a real single-H100 one, where ch04 is SKIPPED.
check_page h100_4x_h100 800 "$runs/h100_run_a.json" "$runs/h100_ch04.json" "$runs/4x_h100_ch04.json"

# The checks shown able to fail: one fault of each kind planted in a copy of the H100 | H200 page
# (a label outside its SVG, a roofline number printed twice, ch09/softmax's table rows deleted, a
# ceiling's name deleted, the sort order inverted, a heading wider than the window).
sed -e '0,/<\/svg>/s//<text x="-100" y="20">planted outside<\/text><\/svg>/' \
    -e '0,/^<text class="point-number"/{/^<text class="point-number"/p}' \
    -e '/<tr[^>]*><td>ch09\/softmax<\/td>/d' \
    -e '0,/<text class="ceiling-label"[^>]*>[^<]*<\/text>/s///' \
    -e 's/(up ? 1 : -1)/(up ? -1 : 1)/' \
    -e 's#<h1>#<h1 style="width:1200px">#' "$out/h100_h200.html" >"$out/planted.html"
planted=$(layout_verdict planted "$runs/h100_run_a.json" "$runs/h100_run_b.json" "$runs/h200_ch07.json" "$runs/h200_ch09.json")
echo "$planted" | sed 's/^/planted: /'
for check in overlaps outside missing unnamed unsorted wide; do
  echo "$planted" | grep -qE "^$check=[1-9]" || { echo "FAILED: the layout check missed the planted $check"; status=1; }
done
echo "$planted" | grep -q "rows table: ch09/softmax" || { echo "FAILED: the layout check missed ch09/softmax's deleted rows"; status=1; }
echo "screenshots: $out/*.png"
exit $status
