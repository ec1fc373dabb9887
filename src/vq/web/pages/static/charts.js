// vq console charts (uPlot). Each element with data-chart="samples" | "usage" | "queue" |
// "ended" reads its data from the <script type="application/json"> named by data-source,
// draws into itself and sets data-points (points drawn per series) and data-drawn="1"
// ("0" while there is too little to draw). No inline script is needed (CSP 'self').
//
// A samples chart with data-live-url refetches that URL (GET /api/v1/jobs/{id}/samples,
// a JSON array of watchdog samples, or the fleet's GET /api/v1/fleet/jobs/{host}/{id}/
// samples, an object whose "samples" is that array) every POLL_MS and redraws in place
// with setData,
// while #job-live[data-state] is PENDING, RUNNING or SUSPENDED; after the job ends it
// fetches once more and stops (data-live="0"); a hidden tab skips its fetches. Elements
// with data-stat="..." inside the chart's panel show the latest numbers, kept up to date.
// Times are UTC, as everywhere else on the console.
(function () {
  "use strict";

  var PALETTE = ["#2456c7", "#d9480f", "#2f9e44", "#ae3ec9", "#f08c00", "#1098ad", "#868e96"];
  var COLORS = { rss: "#2456c7", cpu: "#e8590c", limit: "#b42318", running: "#2f9e44",
    pending: "#f08c00", completed: "#2f9e44", failed: "#c92a2a" };
  var LIVE_STATES = { PENDING: true, RUNNING: true, SUSPENDED: true };
  var POLL_MS = 5000;
  var MAX_FAILURES = 5;

  function readData(el) {
    var source = document.getElementById(el.dataset.source || "");
    if (!source) return null;
    try {
      return JSON.parse(source.textContent || "null");
    } catch (err) {
      return null;
    }
  }

  function width(el) {
    return Math.max(260, Math.floor(el.clientWidth || el.parentNode.clientWidth || 600));
  }

  function fit(el, plot) {
    if (typeof ResizeObserver === "undefined") return;
    var last = width(el);
    new ResizeObserver(function () {
      var now = width(el);
      if (now !== last) {
        last = now;
        plot.setSize({ width: now, height: plot.height });
      }
    }).observe(el);
  }

  function pad(n) {
    return (n < 10 ? "0" : "") + n;
  }

  // Epoch seconds as HH:MM:SS (or HH:MM) in UTC.
  function clock(seconds, withSeconds) {
    var d = new Date(seconds * 1000);
    var text = pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes());
    return withSeconds ? text + ":" + pad(d.getUTCSeconds()) : text;
  }

  // Seconds as m:ss, or h:mm:ss from an hour on.
  function elapsed(seconds) {
    var total = Math.round(seconds);
    var h = Math.floor(total / 3600);
    var m = Math.floor((total % 3600) / 60);
    var s = total % 60;
    return h ? h + ":" + pad(m) + ":" + pad(s) : m + ":" + pad(s);
  }

  function clockAxis(withSeconds) {
    return function (u, splits) {
      return splits.map(function (v) { return v == null ? "" : clock(v, withSeconds); });
    };
  }

  function fmt(digits, unit) {
    return function (u, v) {
      return v == null ? "—" : v.toFixed(digits) + unit;
    };
  }

  // With the pointer off the plot, the legend shows the latest values, not dashes.
  function latestWhenIdle(u) {
    var n = u.data[0].length;
    if (u.cursor.idx == null && n > 0) u.setLegend({ idx: n - 1 });
  }

  // Whole-number ticks for counts of jobs.
  var COUNT_INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000];

  function number(v) {
    return typeof v === "number" && isFinite(v) ? v : null;
  }

  // --- job samples -----------------------------------------------------------------
  // The columns of vq.web.pages.views.sample_series, built from the API's samples.
  function seriesFromSamples(samples, memMb) {
    var data = { t: [], elapsed: [], rss_mb: [], cpu_percent: [], mem_mb: memMb };
    (samples || []).forEach(function (s) {
      var ms = Date.parse(s && s.ts);
      if (isNaN(ms)) return;
      data.t.push(ms / 1000);
      data.elapsed.push(number(s.elapsed_seconds));
      data.rss_mb.push(number(s.rss_mb));
      data.cpu_percent.push(number(s.cpu_percent));
    });
    data.mem_limit_mb = memMb ? data.t.map(function () { return memMb; }) : null;
    return data;
  }

  // The watchdog's memory reading that ended the job, from #job-live's data-kill-*
  // attributes ({at: epoch s, rss: MB, limit: MB or null}), or null. Samples are
  // periodic, so that reading is usually not among them: the chart marks it on its own.
  function killReading() {
    var live = document.getElementById("job-live");
    if (!live || !live.dataset.killRssMb) return null;
    var at = Number(live.dataset.killAt);
    var rss = Number(live.dataset.killRssMb);
    if (!isFinite(at) || !isFinite(rss)) return null;
    return { at: at, rss: rss, limit: Number(live.dataset.killLimitMb) || null };
  }

  // uPlot's columns: time, RSS, CPU, [limit], [the killing reading, a lone point after
  // the samples (x stays ascending)].
  function sampleColumns(data, kill) {
    var t = (data.t || []).slice();
    var columns = [t, (data.rss_mb || []).slice(), (data.cpu_percent || []).slice()];
    var limit = data.mem_limit_mb ? data.mem_limit_mb.slice() : null;
    if (kill) {
      var last = t.length ? t[t.length - 1] : -Infinity;
      var markIndex = t.length;
      t.push(Math.max(kill.at, last + 0.001));
      columns[1].push(null);
      columns[2].push(null);
      if (limit) limit.push(data.mem_mb);
      var marks = t.map(function () { return null; });
      marks[markIndex] = kill.rss;
      if (limit) columns.push(limit);
      columns.push(marks);
      return columns;
    }
    if (limit) columns.push(limit);
    return columns;
  }

  function sampleOptions(el, box) {
    var data = box.data;
    var narrow = width(el) < 480;
    var series = [
      { label: "Time (UTC)",
        value: function (u, v, si, di) {
          if (v == null) return "—";
          var e = di == null ? null : box.data.elapsed && box.data.elapsed[di];
          return clock(v, true) + (e == null ? "" : " · +" + elapsed(e));
        } },
      { label: "RSS", scale: "mb", stroke: COLORS.rss, width: 2, fill: "rgba(36,86,199,0.08)",
        value: fmt(1, " MB"), points: { show: function (u) { return u.data[0].length < 60; } } },
      { label: "CPU", scale: "pct", stroke: COLORS.cpu, width: 2, spanGaps: true,
        value: fmt(1, " %"), points: { show: function (u) { return u.data[0].length < 60; } } }
    ];
    var hooks = { setCursor: [latestWhenIdle], setData: [latestWhenIdle], ready: [latestWhenIdle] };
    if (data.mem_limit_mb) {
      // The limit is memory (left axis, MB), never CPU: its legend entry says so and the
      // line carries its own label, so it cannot be read against the CPU % axis.
      series.push({ label: "memory limit (MB, left axis)", scale: "mb", stroke: COLORS.limit,
        width: 1.5, dash: [6, 4], value: fmt(0, " MB"), points: { show: false } });
      hooks.draw = [limitLabel(data.mem_mb)];
    }
    if (box.kill) {
      series.push({ label: "watchdog reading that stopped the job", scale: "mb",
        stroke: COLORS.limit, width: 0, value: fmt(0, " MB"),
        points: { show: true, size: 11, width: 2, stroke: COLORS.limit, fill: "#fff" } });
      hooks.draw = (hooks.draw || []).concat([killLabel(box.kill)]);
    }
    return {
      width: width(el),
      height: 260,
      series: series,
      scales: {
        x: { time: true },
        mb: { range: function (u, min, max) { return [0, Math.max(1, max || 0) * 1.1]; } },
        pct: { range: function (u, min, max) { return [0, Math.max(10, (max || 0) * 1.15)]; } }
      },
      axes: [
        { space: 70, values: clockAxis(true) },
        { scale: "mb", label: data.mem_limit_mb ? "memory MB (RSS, limit)" : "RSS MB",
          size: narrow ? 50 : 60, stroke: COLORS.rss },
        { scale: "pct", label: "CPU %", side: 1, grid: { show: false }, size: narrow ? 44 : 50,
          stroke: COLORS.cpu }
      ],
      legend: { live: true },
      hooks: hooks
    };
  }

  // Writes "memory limit N MB" just above the dashed limit line, at the plot's left.
  function limitLabel(memMb) {
    return function (u) {
      var y = u.valToPos(memMb, "mb", true);
      if (!isFinite(y)) return;
      var ctx = u.ctx;
      var pad = 4 * (window.devicePixelRatio || 1);
      ctx.save();
      ctx.fillStyle = COLORS.limit;
      ctx.font = Math.round(11 * (window.devicePixelRatio || 1)) + "px system-ui, sans-serif";
      ctx.textBaseline = "bottom";
      ctx.fillText("memory limit " + memMb + " MB", u.bbox.left + pad, y - pad / 2);
      ctx.restore();
      u.root.dataset.limitLabel = "memory limit " + memMb + " MB";
    };
  }

  // Writes "watchdog reading that stopped the job: N MB" next to the marked point.
  function killLabel(kill) {
    return function (u) {
      var x = u.valToPos(u.data[0][u.data[0].length - 1], "x", true);
      var y = u.valToPos(kill.rss, "mb", true);
      if (!isFinite(x) || !isFinite(y)) return;
      var text = "watchdog reading that stopped the job: " + Math.round(kill.rss) + " MB";
      var ratio = window.devicePixelRatio || 1;
      var ctx = u.ctx;
      ctx.save();
      ctx.fillStyle = COLORS.limit;
      ctx.font = "600 " + Math.round(11 * ratio) + "px system-ui, sans-serif";
      ctx.textBaseline = "bottom";
      ctx.textAlign = "right";
      ctx.fillText(text, x - 8 * ratio, y - 6 * ratio);
      ctx.restore();
      u.root.dataset.killLabel = text;
    };
  }

  function showStats(el, data) {
    var panel = el.closest("section") || document;
    var n = (data.t || []).length;
    var rss = (data.rss_mb || []).filter(function (v) { return v != null; });
    var cpu = (data.cpu_percent || []).filter(function (v) { return v != null; });
    var values = {
      count: String(n),
      "latest-rss": rss.length ? rss[rss.length - 1].toFixed(1) + " MB" : "—",
      "peak-rss": rss.length ? Math.max.apply(null, rss).toFixed(1) + " MB" : "—",
      "latest-cpu": cpu.length ? cpu[cpu.length - 1].toFixed(1) + " %" : "—"
    };
    Array.prototype.forEach.call(panel.querySelectorAll("[data-stat]"), function (node) {
      if (values[node.dataset.stat] != null) node.textContent = values[node.dataset.stat];
    });
  }

  // Draw (or redraw in place) from box.data; returns the number of points drawn.
  function drawSamples(el, box) {
    var n = (box.data.t || []).length;
    box.kill = killReading();
    if (n + (box.kill ? 1 : 0) < 2) {
      var empty = el.querySelector(".chart-empty");
      if (empty && n === 1) empty.textContent = jobEnded() ? "Only one sample was taken." :
        "One sample so far: the watchdog records one every 5 s while the job runs.";
      return 0;
    }
    // The plot's series: time, RSS, CPU, then the limit and the killing reading if shown.
    var shape = (box.data.mem_limit_mb ? "L" : "") + (box.kill ? "K" : "");
    if (box.plot && box.shape === shape) {
      box.plot.setData(sampleColumns(box.data, box.kill));
    } else {
      if (box.plot) box.plot.destroy();
      el.innerHTML = "";
      box.plot = new uPlot(sampleOptions(el, box), sampleColumns(box.data, box.kill), el);
      box.shape = shape;
      fit(el, box.plot);
    }
    if (box.kill) el.dataset.killRssMb = String(box.kill.rss);
    return n;
  }

  function mark(el, points) {
    el.dataset.points = String(points);
    el.dataset.drawn = points > 0 ? "1" : "0";
  }

  function jobEnded() {
    var live = document.getElementById("job-live");
    var state = live ? live.dataset.state : "";
    return !!state && !LIVE_STATES[state];
  }

  function follow(el, box) {
    var url = el.dataset.liveUrl;
    var memMb = Number(el.dataset.memMb) || null;
    var failures = 0;
    el.dataset.live = "1";

    function stop() {
      el.dataset.live = "0";
    }

    function tick() {
      if (document.hidden) { // a background tab waits until it is looked at again
        window.setTimeout(tick, POLL_MS);
        return;
      }
      var last = jobEnded(); // the job ended: this fetch is the final one
      fetch(url, { credentials: "same-origin", cache: "no-store",
        headers: { Accept: "application/json" } })
        .then(function (response) {
          if (response.status === 401 || response.status === 403 || response.status === 404) {
            failures = MAX_FAILURES;
          }
          if (!response.ok) throw new Error("samples: HTTP " + response.status);
          return response.json();
        })
        .then(function (payload) {
          var samples = Array.isArray(payload) ? payload : (payload && payload.samples) || [];
          failures = 0;
          box.data = seriesFromSamples(samples, memMb);
          mark(el, drawSamples(el, box));
          showStats(el, box.data);
        })
        .catch(function () {
          failures += 1;
        })
        .then(function () {
          if (last || failures >= MAX_FAILURES) stop();
          else window.setTimeout(tick, POLL_MS);
        });
    }

    window.setTimeout(tick, POLL_MS);
  }

  function samplesChart(el, data) {
    var box = { data: data, plot: null };
    var points = drawSamples(el, box);
    if (el.dataset.liveUrl && typeof fetch === "function" && !jobEnded()) follow(el, box);
    return points;
  }

  // --- stacked bars (usage per day, jobs ended per hour) -----------------------------
  // x: bar centres; parts: [{label, values, color}], bottom first; half: half a bar's
  // span in seconds; unit/digits: the legend's number format; axis: the y axis label.
  function stackedBars(el, x, parts, o) {
    if (x.length === 0 || parts.length === 0) return 0;
    // series i shows the running sum of parts 0..i; drawn from the tallest (back) to the
    // lowest (front); the legend shows each part's own value.
    var stacked = [];
    var running = x.map(function () { return 0; });
    parts.forEach(function (part) {
      running = running.map(function (acc, i) { return acc + (part.values[i] || 0); });
      stacked.push(running.slice());
    });
    var bars = uPlot.paths && uPlot.paths.bars ? uPlot.paths.bars({ size: [0.7, 48] }) : null;
    var series = [o.xSeries || {}];
    var columns = [x];
    for (var i = parts.length - 1; i >= 0; i--) {
      (function (part, values) {
        series.push({
          label: part.label, stroke: part.color, fill: part.color, width: 0, paths: bars,
          points: { show: false },
          value: function (u, v, si, di) {
            return di == null ? "—" : (part.values[di] || 0).toFixed(o.digits) + o.unit;
          }
        });
        columns.push(values);
      })(parts[i], stacked[i]);
    }
    var yAxis = { label: o.axis, size: 60 };
    if (o.incrs) yAxis.incrs = o.incrs;
    var opts = {
      width: width(el),
      height: o.height || 260,
      series: series,
      scales: {
        x: { time: true, range: function () { return [x[0] - o.half, x[x.length - 1] + o.half]; } },
        y: { range: function (u, min, max) { return [0, Math.max(o.minTop, max) * 1.1]; } }
      },
      axes: [o.xAxis || { space: 60 }, yAxis],
      legend: { live: true },
      hooks: { setCursor: [latestWhenIdle], ready: [latestWhenIdle] }
    };
    el.innerHTML = "";
    fit(el, new uPlot(opts, columns, el));
    return x.length;
  }

  function usageChart(el, data) {
    var parts = (data.series || []).map(function (s, i) {
      return { label: s.label, values: s.values, color: PALETTE[i % PALETTE.length] };
    });
    var labels = data.labels || [];
    return stackedBars(el, data.days || [], parts, {
      half: 43200, unit: " h", digits: 3, axis: "CPU-hours", minTop: 0.01,
      xSeries: { label: "Day (UTC)", value: function (u, v, si, di) {
        return di == null || labels[di] == null ? "—" : labels[di];
      } }
    });
  }

  function endedChart(el, data) {
    var parts = [
      { label: "completed", values: data.completed || [], color: COLORS.completed },
      { label: "failed or killed", values: data.failed || [], color: COLORS.failed }
    ];
    return stackedBars(el, data.hours_t || [], parts, {
      half: 1800, unit: "", digits: 0, axis: "jobs", minTop: 1, height: 160, incrs: COUNT_INCRS,
      xSeries: { label: "Hour (UTC)", value: function (u, v) {
        return v == null ? "—" : clock(v - 1800) + "–" + clock(v + 1800);
      } },
      xAxis: { space: 50, values: clockAxis(false) }
    });
  }

  // --- queue over time ---------------------------------------------------------------
  function queueChart(el, data) {
    var t = data.t || [];
    if (t.length < 2) return 0;
    var step = uPlot.paths && uPlot.paths.stepped ? uPlot.paths.stepped({ align: 1 }) : null;
    // pending first, so running (drawn later) stays visible where both lines coincide
    var series = [
      { label: "Time (UTC)", value: function (u, v) { return v == null ? "—" : clock(v); } },
      { label: "pending", stroke: COLORS.pending, width: 2, paths: step,
        points: { show: false }, value: fmt(0, "") },
      { label: "running", stroke: COLORS.running, fill: "rgba(47,158,68,0.12)", width: 2,
        paths: step, points: { show: false }, value: fmt(0, "") }
    ];
    // the same UTC hours as the "ended per hour" bars below it, so the two line up
    var hours = data.hours_t || [];
    var xRange = hours.length ? [hours[0] - 1800, hours[hours.length - 1] + 1800] : null;
    var opts = {
      width: width(el),
      height: 220,
      series: series,
      scales: {
        x: { time: true, range: xRange ? function () { return xRange; } : undefined },
        y: { range: function (u, min, max) { return [0, Math.max(2, max || 0) * 1.15]; } }
      },
      axes: [{ space: 50, values: clockAxis(false) },
        { label: "jobs", size: 60, incrs: COUNT_INCRS }],
      legend: { live: true },
      hooks: { setCursor: [latestWhenIdle], ready: [latestWhenIdle] }
    };
    el.innerHTML = "";
    if (!xRange) delete opts.scales.x.range;
    fit(el, new uPlot(opts, [t, data.pending || [], data.running || []], el));
    return t.length;
  }

  var KINDS = { samples: samplesChart, usage: usageChart, queue: queueChart, ended: endedChart };

  function draw() {
    if (typeof uPlot === "undefined") return;
    var charts = document.querySelectorAll("[data-chart]");
    Array.prototype.forEach.call(charts, function (el) {
      var data = readData(el);
      var kind = KINDS[el.dataset.chart];
      if (!data || !kind) return;
      mark(el, kind(el, data));
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
