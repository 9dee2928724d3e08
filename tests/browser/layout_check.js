// Run by report_test.sh inside Chromium's layout, appended to a copy of a report page after a
// line `var expected = {hardware_key: ["chNN/example", ...], ...}` (the examples of the results
// files the page was made from). It clicks through the page and writes its verdict into the
// pre element "layout-check" that --dump-dom returns, one line per check, "name=count details":
//   overlaps  two SVG labels overlap (each label's own box, rotated as drawn, less 1 px a side);
//   outside   a label runs past its SVG's edge, where the browser clips it;
//   missing   an example of the runs is absent from its GPU's rows table or speedup chart, or
//             (several GPUs) has no status in its GPU's column of the side-by-side table;
//   unnamed   a ceiling line drawn with no name of its own in the same SVG;
//   unsorted  a header click does not sort a table by that number (first click ascending,
//             second descending), or the click loses rows;
//   wide      the page is wider than the window (it must fit 800 px).
(function () {
  var found = { overlaps: [], outside: [], missing: [], unnamed: [], unsorted: [], wide: [] };

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
  document.querySelectorAll("svg").forEach(function (svg, n) {
    var edge = svg.getBoundingClientRect();
    var labels = Array.from(svg.querySelectorAll("text")).filter(function (t) { return t.textContent.trim(); })
      .map(function (t) { return { t: t.textContent.trim(), c: corners(t) }; });
    labels.forEach(function (l, i) {
      for (var j = i + 1; j < labels.length; ++j)
        if (!separated(l.c, labels[j].c)) found.overlaps.push("svg " + n + ": \"" + l.t + "\" / \"" + labels[j].t + "\"");
      if (l.c.some(function (q) { return q[0] < edge.left || q[0] > edge.right || q[1] < edge.top || q[1] > edge.bottom; }))
        found.outside.push("svg " + n + ": \"" + l.t + "\"");
    });
    // Every ceiling drawn (a slope or a roof) is named by a label of its own.
    svg.querySelectorAll(".roof").forEach(function (roof) {
      var ceiling = roof.getAttribute("data-ceiling");
      var named = Array.from(svg.querySelectorAll("text.ceiling-label")).some(function (t) {
        return t.getAttribute("data-ceiling") === ceiling && t.textContent.trim();
      });
      if (!named) found.unnamed.push("svg " + n + ": " + ceiling);
    });
  });

  // Every example of the runs, in its GPU's section and, with several GPUs, in its GPU's column.
  function names(rows) { return rows.map(function (tr) { return tr.cells[0].textContent.trim(); }); }
  function has(list, example) { return list.some(function (n) { return n === example || n.indexOf(example + "/") === 0; }); }
  var gpus = document.querySelector("table.gpus");
  var gpuRows = gpus ? Array.from(gpus.tBodies[0].rows) : [];
  // A GPU's columns are headed by its name ("H100 status") and carry its hardware key (data-gpu).
  var gpuHeads = gpus ? Array.from(gpus.tHead.rows[0].cells) : [];
  if (Object.keys(expected).length > 1 && !gpus) found.missing.push("no side-by-side table for " + Object.keys(expected).length + " GPUs");
  Object.keys(expected).forEach(function (gpu) {
    var section = document.querySelector('section[data-gpu="' + gpu + '"]');
    if (!section) { found.missing.push(gpu + ": no section"); return; }
    var table = section.querySelector("table.rows");
    var tabled = table ? names(Array.from(table.tBodies[0].rows)) : [];
    var charted = Array.from(section.querySelectorAll(".speedup-row")).map(function (g) { return g.getAttribute("data-example"); });
    var status = gpuHeads.findIndex(function (th) { return th.getAttribute("data-gpu") === gpu && /status$/.test(th.textContent.trim()); });
    if (gpus && status < 0) found.missing.push(gpu + ": no column in the side-by-side table");
    expected[gpu].forEach(function (example) {
      if (!has(tabled, example)) found.missing.push(gpu + " rows table: " + example);
      if (!has(charted, example)) found.missing.push(gpu + " speedups: " + example);
      if (gpus && status >= 0 && !gpuRows.some(function (tr) {
        return has([tr.cells[0].textContent.trim()], example) && tr.cells[status].textContent.trim() !== "-";
      })) found.missing.push(gpu + " side by side: " + example);
    });
  });

  // Sorting: every table's speedup columns, clicked twice.
  document.querySelectorAll("table.sortable").forEach(function (table, n) {
    var heads = Array.from(table.tHead.rows[0].cells);
    var columns = heads.map(function (th, i) { return /speedup/.test(th.textContent) ? i : -1; }).filter(function (i) { return i >= 0; });
    if (!columns.length) found.unsorted.push("table " + n + ": no speedup column");
    columns.forEach(function (col) {
      var rows = table.tBodies[0].rows.length;
      ["ascending", "descending"].forEach(function (order) {
        heads[col].click();
        var values = Array.from(table.tBodies[0].rows).map(function (tr) { return parseFloat(tr.cells[col].textContent); })
          .filter(function (v) { return !isNaN(v); });
        var ok = values.every(function (v, i) { return i === 0 || (order === "ascending" ? values[i - 1] <= v : values[i - 1] >= v); });
        var what = "table " + n + " \"" + heads[col].textContent.trim() + "\" " + order;
        if (values.length < 2) found.unsorted.push(what + ": fewer than 2 numbers");
        else if (!ok) found.unsorted.push(what + ": " + values.join(","));
        if (table.tBodies[0].rows.length !== rows) found.unsorted.push(what + ": " + rows + " rows became " + table.tBodies[0].rows.length);
      });
    });
  });

  if (document.documentElement.scrollWidth > window.innerWidth)
    found.wide.push(document.documentElement.scrollWidth + " px in a " + window.innerWidth + " px window");

  var out = document.createElement("pre");
  out.id = "layout-check";
  out.textContent = Object.keys(found).map(function (k) { return k + "=" + found[k].length + " " + found[k].slice(0, 8).join("; "); }).join("\n");
  document.body.appendChild(out);
})();
