// Draws kernel-<cell>.html: the kernel row named after the '#' (kernel-prefill.html#k003), or the cell's kernel
// list without one. The data is the page's #kernel-data block (JSON, deflated and base64-encoded: its
// data-encoding, site/kernel_pages.py DATA_ENCODING), inflated by DecompressionStream before anything is drawn;
// PERFREPORT_FIELDS (written above this code) gives
// each derived number's unit, formula and the ncu metrics it read. Every text goes in through textContent:
// kernel names and rule messages are data, never markup.
(function () {
  "use strict";
  var FIELDS = PERFREPORT_FIELDS;
  var AMD_FIELDS = PERFREPORT_AMD_FIELDS;  // per gfx: AMD rows' fields with rocprof-compute counters
  var PADDING_FLAG = PERFREPORT_PADDING_FLAG;  // warehouse/roofline.py PADDING_FLAG, written above this code
  var root = document.getElementById("kernel");
  var data = null, kernels = [];  // set by readData before the first draw
  var DASH = "\u2014";

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function isNum(v) { return typeof v === "number" && isFinite(v); }
  function num(v) {
    if (!isNum(v)) return v === null || v === undefined ? DASH : String(v);
    if (v === 0) return "0";
    if (Math.abs(v) >= 1e4) return Math.round(v).toLocaleString("en-US");
    return String(Number(v.toPrecision(4)));
  }
  function us(ns) { return isNum(ns) ? num(ns / 1e3) : DASH; }  // the unit is in the column header
  function link(href, text) { var a = el("a", text); a.href = href; return a; }
  function label(k) { return k.id + " " + (k.label || k["function"]); }  // kernels/labels.py, as on every page
  function section(title, id) {
    var s = el("section");
    s.id = id;
    s.appendChild(el("h2", title));
    root.appendChild(s);
    return s;
  }
  // A numeric cell: its text and the raw value it sorts on (null: an em dash, kept last in either direction).
  function n(value, text) { return {text: text, sort: isNum(value) ? String(value) : ""}; }
  // rows: arrays of cells (text, a DOM node, or n(value, text)); numeric: indexes of number columns (right-aligned,
  // sorted on their raw values); wrap: indexes that wrap; names: kernel-name columns, capped in width by site.css
  // (data-name) so a long name never pushes the numbers out of view. Sortable and filterable (site-tables.js)
  // unless `plain`.
  function table(id, headers, rows, numeric, wrap, plain, names) {
    var box = el("div", null, "scroll");
    var t = el("table", null, plain ? null : "data");
    t.id = id;
    if (names) t.setAttribute("data-name", names.map(function (i) { return i + 1; }).join(" "));
    var tr = el("tr");
    headers.forEach(function (h, i) {
      var th = el("th", h);
      if ((numeric || []).indexOf(i) >= 0) {
        th.className = "num";
        th.setAttribute("data-sort-method", "num");
        th.setAttribute("data-sort-reverse", "");
      }
      tr.appendChild(th);
    });
    var head = el("thead");
    head.appendChild(tr);
    t.appendChild(head);
    var body = el("tbody");
    rows.forEach(function (r) {
      var row = el("tr");
      r.forEach(function (c, i) {
        var td = el("td");
        if (c instanceof Node) td.appendChild(c);
        else if (c !== null && typeof c === "object") {
          td.textContent = c.text;
          td.setAttribute("data-sort", c.sort);
        } else if (c === null || c === undefined || c === "") {
          td.textContent = DASH;
          td.setAttribute("data-sort", "");
        } else td.textContent = String(c);
        var cls = [];
        if ((numeric || []).indexOf(i) >= 0) cls.push("num");
        if ((wrap || []).indexOf(i) >= 0) cls.push("wrap");
        if (cls.length) td.className = cls.join(" ");
        row.appendChild(td);
      });
      body.appendChild(row);
    });
    t.appendChild(body);
    box.appendChild(t);
    var wrap = el("div");  // holds the filter box above the scroll box
    wrap.appendChild(box);
    if (!plain && window.PerfreportTables) window.PerfreportTables.enhance(t);
    return wrap;
  }
  function code(text) { return el("code", text); }

  function list(missing) {
    if (missing) root.appendChild(el("p", "No kernel row " + missing + " in cell " + data.cell + ".", "missing"));
    if (!kernels.length) {
      var empty = el("p", "Cell " + data.cell + " has no ncu kernel rows: import a capture with ", "missing");
      empty.appendChild(code("perftunereport import_ncu"));
      empty.appendChild(document.createTextNode(", then render again."));
      root.appendChild(empty);
      return;
    }
    var s = section("Kernel rows of cell " + data.cell, "kernel-list");
    s.appendChild(table("kernel-list-table", ["kernel", "family", "launches", "duration (\u00b5s)", "bound",
                                              "demangled name"],
      kernels.map(function (k) {
        var a = link("#" + encodeURIComponent(k.id), label(k));
        a.title = k.name;  // the whole demangled name on hover
        return [a, k.family, n(k.launches, num(k.launches)), n(k.duration_ns, us(k.duration_ns)), k.bound, k.name];
      }), [2, 3], [5], false, [0]));
  }

  // The answer first: where the kernel stands (AI, %SoL against which roof, bound, time share, padding), then
  // what the row is and every number behind it.
  function headline(k, joined) {
    var s = section("At a glance", "headline");
    var pct = function (v) { return isNum(v) ? v.toFixed(1) + "%" : null; };
    var share = joined.filter(function (r) { return isNum(r.time_share_pct); });
    var total = share.reduce(function (a, r) { return a + r.time_share_pct; }, 0);
    var padded = joined.filter(function (r) { return isNum(r.executed_per_useful); });
    var amdahl = joined.filter(function (r) { return isNum(r.amdahl_bound_pct); });
    var trials = joined.filter(function (r) { return r.launch_us_trials; });
    var rows = [
      ["arithmetic intensity", k.ai_measured && isNum(k.arithmetic_intensity)
        ? num(k.arithmetic_intensity) + " FLOP/B (DRAM), measured"
        : "not measured: " + (k.ai_measured ? "no floating-point work (AI 0)" : "no FLOP or DRAM-byte counters in " +
                              "this capture (--set full measures them)")],
      ["% of datasheet roof (%SoL)", isNum(k.sol_pct) ? pct(k.sol_pct) + " of " + k.sol_ceiling_key
        : "not measured" + (k.sol_ceiling_key ? " (its roof would be " + k.sol_ceiling_key + ")" : "")],
      ["% of measured roof", isNum(k.pct_of_achievable) ? pct(k.pct_of_achievable) + " of " + k.achievable_key
        : (k.achievable_key ? "not measured (" + k.achievable_key + ")" : "no measured roof on this hardware")],
      ["bound", (k.bound || DASH) + (k.bound_reason ? ": " + k.bound_reason : "")],
      ["time share", share.length ? num(total) + "% of the cell's timeline (" + share[0].time_source + ")"
        : "no timeline imported for this kernel: ncu durations only"],
      ["over trials", trials.length ? trials.map(function (r) {
        return "time per launch " + r.launch_us_trials + " \u00b5s; time share " + r.share_trials + " %";
      }).join("; ") + " (mean [95% CI] over the cell's timeline trials)"
        : "one measurement: no timeline trials (import_torch_trace --trial N, or the cell's trials:)"],
      ["executed / useful FLOPs", padded.length ? padded.map(function (r) {
        return num(r.executed_per_useful) + "x" + (r.op ? " (" + r.op + ")" : "");
      }).join("; ") + (padded.some(function (r) { return r.executed_per_useful >= PADDING_FLAG; })
        ? ": executes more than its op needs; the padded work is the lever before any roof" : "")
        : "unknown (no trace recorded with shapes)"],
      ["Amdahl bound", amdahl.length ? num(amdahl.reduce(function (a, r) { return a + r.amdahl_bound_pct; }, 0)) +
        "% of the cell's timeline (" + (amdahl[0].amdahl_basis || DASH) + ")" : "unknown (needs a time share and a roof)"]
    ];
    s.appendChild(table("headline-table", ["", ""], rows, [], [1], true));
  }

  function identity(k, joined) {
    var s = section("What this row is", "identity");
    var src = null;
    data.sources.forEach(function (x) { if (x.source === k.source) src = x; });
    var rows = [
      ["label", k.label || DASH], ["demangled name", k.name], ["function", k["function"]], ["mangled name", k.mangled], ["family", k.family],
      ["source", k.source + (src ? " (" + src.format + (src.section_set ? ", --set " + src.section_set : "") +
                                   ", " + (src.gpu || "GPU not recorded") + ")" : "")],
      ["grid x block", k.grid_size + " x " + k.block_size],
      ["launches", k.launches + " (ncu launch ids " + k.launch_ids.join(", ") + ")"],
      ["instance", k.instance ? "#" + k.instance + ": launches of this name, grid and block that did different " +
                   "work are separate rows, numbered by first launch" : "all launches of this name, grid and " +
                   "block did the same work"],
      ["bound", k.bound + ": " + k.bound_reason],
      ["ceilings", "%SoL against " + (k.sol_ceiling_key || DASH) + "; % of achievable against " +
                   (k.achievable_key || "no measured ceiling on this hardware")]
    ];
    s.appendChild(table("identity-table", ["", ""], rows, [], [1], true));
    if (joined.length) {
      s.appendChild(el("h3", "Time share and Amdahl bound (kernel_join)"));
      s.appendChild(table("join-table", ["kernel", "time share (%)", "share split by", "launched by",
                                         "input shapes", "total (ms)", "time source", "instances",
                                         "executed / useful FLOPs", "Amdahl bound (%)", "bound against"],
        joined.map(function (r) {
          return [r.label, n(r.time_share_pct, num(r.time_share_pct)), r.share_split, r.op, r.shapes,
                  n(r.total_ms, num(r.total_ms)), r.time_source, n(r.instances, num(r.instances)),
                  n(r.executed_per_useful, num(r.executed_per_useful)),
                  n(r.amdahl_bound_pct, num(r.amdahl_bound_pct)), r.amdahl_basis];
        }), [1, 5, 7, 8, 9], [4, 10]));
    } else {
      s.appendChild(el("p", "No time share for this row: import a timeline of the cell (import_nsys or " +
                            "import_torch_trace) to get its share and Amdahl bound.", "note"));
    }
    return src;
  }

  function open(k, src) {
    var amd = k.vendor === "amd";
    var s = section("Open the source " + (amd ? "workload at this dispatch (rocprof-compute)"
                                              : "report at this launch (Nsight Compute)"), "open");
    var launch = String(k.launch_ids[0]);
    s.appendChild(el("p", "From the campaign folder; " + (amd ? "dispatch " + launch + " is the row's first " +
                          "dispatch (pmc_perf.csv's Dispatch_ID)." : "launch " + launch + " is the row's first " +
                          "launch (ncu's ID column)."), "note"));
    var lines = src ? src.open : [k.source + ": source not listed in this cell's ncu_sources"];
    lines.forEach(function (line) {
      var pre = el("pre");
      pre.appendChild(el("code", line.split("{launch}").join(launch)));
      s.appendChild(pre);
    });
  }

  function derived(k) {
    // an AMD row (vendor amd, from rocprof-compute) reads its gfx's counters, named as rocprof-compute names them
    var amd = k.vendor === "amd";
    var fields = amd ? (AMD_FIELDS[(k.rocprof || {}).gfx_arch] || []) : FIELDS;
    var counters = amd ? "rocprof-compute counters" : "ncu metrics";
    var s = section("Derived numbers: value, formula and the " + counters + " read", "derived");
    var stats = k.stats || {};
    var rows = [];
    fields.forEach(function (f) {
      var v = k[f.field];
      var metrics = f.metrics.join("\n");
      if (v !== null && typeof v === "object") {
        Object.keys(v).sort().forEach(function (sub) {
          rows.push([f.field + "." + sub, n(v[sub], num(v[sub])), null, f.unit, f.formula, metrics]);
        });
        if (!Object.keys(v).length) rows.push([f.field, n(null, DASH), null, f.unit, f.formula, metrics]);
        return;
      }
      var st = stats[f.field];
      var range = st && st.n > 1 ? num(st.min) + " \u2013 " + num(st.max) + " (" + st.n + " launches)" : null;
      rows.push([f.field, n(v, v === null || v === undefined ? "not captured" : num(v)), range, f.unit, f.formula,
                 metrics]);
    });
    s.appendChild(el("p", "Means over the row's launches; null counters stay \u201cnot captured\u201d (never 0). " +
                          (amd ? "Counter names are pmc_perf.csv's, $names sysinfo.csv's, through the formulas of " +
                                 "perfreport/rocprof/formulas.yaml for " + ((k.rocprof || {}).gfx_arch || "?") + "."
                               : "Metric names are those of the metric catalog (perfreport/ncu/catalog/metrics.yaml)."),
                     "note"));
    s.appendChild(table("derived-table", ["field", "value", "min \u2013 max", "unit", "formula", counters],
                        rows, [1], [4, 5]));
  }

  function stalls(k) {
    var s = section("Warp stalls: cycles per issued instruction and share", "stalls");
    var cycles = k.warp_stall_cycles || {};
    var share = k.warp_stalls_pct || {};
    var reasons = Object.keys(Object.assign({}, cycles, share));
    if (!reasons.length) {
      s.appendChild(el("p", k.vendor === "amd" ? "Not captured: rocprof-compute counts wave states per CU, " +
                            "not stall reasons per issued instruction." :
                            "Not captured: warp states need the WarpStateStats section (--set full).", "missing"));
      return;
    }
    reasons.sort(function (a, b) { return (cycles[b] || share[b] || 0) - (cycles[a] || share[a] || 0); });
    // the total said is the sum of the rows shown; ncu's own cycles between issues is named beside it, as the
    // per-reason counters are sampled and need not add up to it exactly
    var sum = reasons.reduce(function (t, r) { return t + (isNum(cycles[r]) ? cycles[r] : 0); }, 0);
    s.appendChild(el("p", "Cycles a warp spends stalled on each reason per instruction it issues (ncu's Warp " +
                          "State Statistics); the rows below add up to " + num(sum) + " cycles (ncu's warp " +
                          "cycles per issued instruction: " + num(k.warp_cycles_per_issued_inst) + ").", "note"));
    s.appendChild(table("stalls-table", ["reason", "cycles per issued instruction", "share (%)"],
      reasons.map(function (r) {
        return [r, n(cycles[r], num(cycles[r])), n(share[r], isNum(share[r]) ? share[r].toFixed(1) : DASH)];
      }), [1, 2]));
  }

  function rules(k) {
    var s = section("ncu rule results (guided analysis)", "rules");
    if (k.rules === null || k.rules === undefined) {
      s.appendChild(el("p", "The source holds no rule results (an ncu --page raw export has none): import the " +
                            ".ncu-rep or a --page details export to see them.", "missing"));
      return;
    }
    if (!k.rules.length) {
      s.appendChild(el("p", "ncu reported no rule result for this launch.", "note"));
      return;
    }
    s.appendChild(el("p", "Of launch " + k.rules[0].launch_id + " (the row's first). Estimated speedup: ncu's " +
                          "estimate of the kernel time saved if the issue were fixed, global (the whole kernel) or " +
                          "local (the part the rule looks at).", "note"));
    s.appendChild(table("rules-table", ["type", "section", "rule", "estimated speedup (%)", "message"],
      k.rules.map(function (r) {
        return [r.type, r.section, r.rule, n(r.speedup_pct, isNum(r.speedup_pct) ? num(r.speedup_pct) + " (" +
                r.speedup_type + ")" : DASH), r.message];
      }), [3], [4]));
  }

  function launches(k) {
    var s = section("Launches this row stands for", "launches");
    var per = k.per_launch && k.per_launch.length ? k.per_launch : [k];
    s.appendChild(table("launches-table", ["launch id", "grid", "block", "duration (\u00b5s)",
                                           "tensor + CUDA-core FLOPs", "DRAM bytes", "SM %peak (%)"],
      per.map(function (r, i) {
        var id = r.launch_id !== undefined ? r.launch_id : k.launch_ids[i];
        var flops = r.flops ? r.flops.total : null;
        return [n(id, String(id)), k.grid_size, k.block_size, n(r.duration_ns, us(r.duration_ns)),
                n(flops, num(flops)), n(r.dram_bytes, num(r.dram_bytes)),
                n(r.sm_throughput_pct, isNum(r.sm_throughput_pct) ? r.sm_throughput_pct.toFixed(1) : DASH)];
      }), [0, 3, 4, 5, 6]));
  }

  function draw() {
    root.textContent = "";
    var id = decodeURIComponent(location.hash.slice(1));
    var k = null;
    kernels.forEach(function (x) { if (x.id === id) k = x; });
    if (!k) { list(id); return; }
    var back = el("p");
    back.appendChild(link("#", "all kernel rows of cell " + data.cell));
    root.appendChild(back);
    root.appendChild(el("h2", label(k), "kernel-title"));
    var joined = data.join.filter(function (r) { return r.kernel_id === k.id; });  // the row's kernel_join rows
    headline(k, joined);
    var src = identity(k, joined);
    open(k, src);
    derived(k);
    stalls(k);
    rules(k);
    launches(k);
    document.title = label(k) + " \u00b7 " + data.cell + " \u00b7 perftunereport";
  }
  function readData() {
    var block = document.getElementById("kernel-data");
    var encoding = block.getAttribute("data-encoding");
    if (!encoding) return Promise.resolve(JSON.parse(block.textContent));
    if (encoding !== "deflate-raw+base64" || typeof DecompressionStream === "undefined") {
      return Promise.reject(new Error("this browser cannot read the page's data (" + encoding + "): it needs " +
                                      "DecompressionStream (Chrome 80, Firefox 113, Safari 16.4 or later)"));
    }
    var text = atob(block.textContent.trim());
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
    return new Response(stream).text().then(JSON.parse);
  }
  readData().then(function (d) {
    data = d;
    kernels = (data.doc && data.doc.kernels) || [];
    window.addEventListener("hashchange", draw);
    draw();
  }, function (err) {
    root.appendChild(el("div", String(err && err.message || err), "missing"));
  });
})();
