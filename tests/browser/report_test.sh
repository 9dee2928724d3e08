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

# The merged page of several GPUs (a real 4x H100 ch04 run beside a real single-H100 one, where
# ch04 is SKIPPED) gets the side-by-side table. A copy of each page gets a checking script that
# runs in Chromium's layout: no two SVG labels may overlap (each label's own box, rotated as
# drawn, less 1 px each side), and clicking the speedup header must sort the rows
# table by that number. The script writes its verdict into the DOM that --dump-dom returns.
"$bench" report "$fixtures/report/h100_run_a.json" "$fixtures/report/h100_ch04.json" \
  "$fixtures/report/4x_h100_ch04.json" --expectations-dir "$fixtures/report" --html "$out/gpus.html" >/dev/null ||
  fail "bench report (two GPUs)"
grep -q 'class="gpus sortable"' "$out/gpus.html" || { echo "FAILED: no side-by-side table for two GPUs"; status=1; }
for gpu in h100_80gb_hbm3 4x_h100_80gb_hbm3; do
  grep -q "<th>$gpu speedup</th>" "$out/gpus.html" || { echo "FAILED: no $gpu column"; status=1; }
done
timeout 120 "$browser" "${flags[@]}" --window-size=800,3000 --screenshot="$out/gpus.png" \
  "file://$out/gpus.html" >>"$out/screenshot.log" 2>&1 || fail "screenshot (two GPUs)"
check_script='<script>
(function () {
  // Each label as the four corners of its own box (getBBox) in page coordinates (getScreenCTM),
  // so a rotated label is a rotated rectangle, not its much larger upright bounding box; two
  // labels overlap when no edge of either separates them (separating axis test), shrunk 1 px.
  function corners(t) {
    var b = t.getBBox(), m = t.getScreenCTM(), p = t.ownerSVGElement.createSVGPoint();
    return [[b.x + 1, b.y + 1], [b.x + b.width - 1, b.y + 1], [b.x + b.width - 1, b.y + b.height - 1], [b.x + 1, b.y + b.height - 1]]
      .map(function (c) { p.x = c[0]; p.y = c[1]; var q = p.matrixTransform(m); return [q.x, q.y]; });
  }
  function separated(a, b) {
    return [a, b].some(function (poly) {
      return poly.some(function (c, i) {
        var d = poly[(i + 1) % 4], nx = d[1] - c[1], ny = c[0] - d[0];
        var pa = a.map(function (q) { return q[0] * nx + q[1] * ny; }), pb = b.map(function (q) { return q[0] * nx + q[1] * ny; });
        return Math.max.apply(null, pa) <= Math.min.apply(null, pb) || Math.max.apply(null, pb) <= Math.min.apply(null, pa);
      });
    });
  }
  var overlaps = [];
  document.querySelectorAll("svg").forEach(function (svg, n) {
    var boxes = Array.from(svg.querySelectorAll("text")).filter(function (t) { return t.textContent.trim(); })
      .map(function (t) { return { t: t.textContent.trim(), c: corners(t) }; });
    for (var i = 0; i < boxes.length; ++i)
      for (var j = i + 1; j < boxes.length; ++j)
        if (!separated(boxes[i].c, boxes[j].c)) overlaps.push("svg " + n + ": \"" + boxes[i].t + "\" / \"" + boxes[j].t + "\"");
  });
  var sorted = "no rows table";
  var table = document.querySelector("table.rows");
  if (table) {
    var col = Array.from(table.tHead.rows[0].cells).findIndex(function (th) { return th.textContent.trim() === "speedup [95% CI]"; });
    table.tHead.rows[0].cells[col].click();
    var values = Array.from(table.tBodies[0].rows).map(function (tr) { return parseFloat(tr.cells[col].textContent); })
      .filter(function (v) { return !isNaN(v); });
    sorted = values.length < 2 ? "too few rows" : values.every(function (v, i) { return i === 0 || values[i - 1] <= v; }) ? "ascending" : "NOT sorted: " + values.join(",");
  }
  var out = document.createElement("pre");
  out.id = "layout-check";
  out.textContent = "overlaps=" + overlaps.length + " " + overlaps.slice(0, 8).join("; ") + "\nsort=" + sorted;
  document.body.appendChild(out);
})();
</script>'
for page in report gpus; do
  { grep -v '^</body></html>$' "$out/$page.html"; printf '%s\n</body></html>\n' "$check_script"; } >"$out/${page}_checked.html"
  timeout 120 "$browser" "${flags[@]}" --window-size=800,3000 --virtual-time-budget=5000 --dump-dom \
    "file://$out/${page}_checked.html" >"$out/${page}_checked_dom.html" 2>>"$out/dom.log" || fail "dump-dom ($page)"
  verdict=$(sed -n '/id="layout-check"/,/<\/pre>/p' "$out/${page}_checked_dom.html" | sed 's/<[^>]*>//g')
  echo "$page: $verdict"
  case "$verdict" in
    *"overlaps=0 "*"sort=ascending"*) ;;
    *) echo "FAILED: $page: labels overlap or sorting failed (above)"; status=1 ;;
  esac
done
echo "screenshots: $out/report.png $out/gpus.png"
exit $status
