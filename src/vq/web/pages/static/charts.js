// vq console charts (uPlot). Each element with data-chart="samples" | "usage" reads its
// data from the <script type="application/json"> named by data-source, draws into itself
// and then sets data-points (points drawn per series) and data-drawn="1". No inline
// script is needed (CSP script-src 'self').
(function () {
  "use strict";

  var PALETTE = ["#2456c7", "#d9480f", "#2f9e44", "#ae3ec9", "#f08c00", "#1098ad", "#868e96"];

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
    return Math.max(280, Math.floor(el.clientWidth || el.parentNode.clientWidth || 600));
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

  function fmt(digits, unit) {
    return function (u, v) {
      return v == null ? "—" : v.toFixed(digits) + unit;
    };
  }

  function samplesChart(el, data) {
    var t = data.t || [];
    if (t.length < 2) return 0; // one point makes no line; the page says so instead
    var series = [
      {},
      { label: "RSS", scale: "mb", stroke: PALETTE[0], width: 2, fill: "rgba(36,86,199,0.08)",
        value: fmt(1, " MB"), points: { show: t.length < 60 } },
      { label: "CPU", scale: "pct", stroke: PALETTE[1], width: 2, value: fmt(1, " %"),
        points: { show: t.length < 60 } }
    ];
    var columns = [t, data.rss_mb || [], data.cpu_percent || []];
    if (data.mem_limit_mb) {
      series.push({ label: "memory limit", scale: "mb", stroke: "#b42318", width: 1.5,
        dash: [6, 4], value: fmt(0, " MB"), points: { show: false } });
      columns.push(data.mem_limit_mb);
    }
    var opts = {
      width: width(el),
      height: 260,
      series: series,
      scales: {
        x: { time: true },
        mb: { range: function (u, min, max) { return [0, Math.max(1, max) * 1.1]; } },
        pct: { range: function (u, min, max) { return [0, Math.max(100, max || 0) * 1.05]; } }
      },
      axes: [
        {},
        { scale: "mb", label: "MB", size: 60 },
        { scale: "pct", label: "CPU %", side: 1, grid: { show: false }, size: 50 }
      ],
      legend: { live: true }
    };
    el.innerHTML = "";
    fit(el, new uPlot(opts, columns, el));
    return t.length;
  }

  function usageChart(el, data) {
    var days = data.days || [];
    var raw = (data.series || []).map(function (s) { return s.values; });
    if (days.length === 0 || raw.length === 0) return 0;
    // Stacked bars: series i shows the running sum of series 0..i; drawn from the
    // tallest (back) to the lowest (front); the legend shows each tag's own value.
    var stacked = [];
    var running = days.map(function () { return 0; });
    raw.forEach(function (values) {
      running = running.map(function (acc, i) { return acc + (values[i] || 0); });
      stacked.push(running.slice());
    });
    var order = raw.map(function (_, i) { return raw.length - 1 - i; });
    var bars = uPlot.paths && uPlot.paths.bars ? uPlot.paths.bars({ size: [0.7, 48] }) : null;
    var series = [{}];
    var columns = [days];
    order.forEach(function (i) {
      var color = PALETTE[i % PALETTE.length];
      series.push({
        label: data.series[i].label,
        stroke: color,
        fill: color,
        width: 0,
        paths: bars,
        points: { show: false },
        value: function (u, v, si, di) {
          return di == null ? "—" : (raw[i][di] || 0).toFixed(3) + " h";
        }
      });
      columns.push(stacked[i]);
    });
    var opts = {
      width: width(el),
      height: 260,
      series: series,
      scales: {
        x: { time: true, range: function () { return [days[0] - 43200, days[days.length - 1] + 43200]; } },
        y: { range: function (u, min, max) { return [0, Math.max(0.01, max) * 1.1]; } }
      },
      axes: [{ space: 60 }, { label: "CPU-hours", size: 60 }],
      legend: { live: true }
    };
    el.innerHTML = "";
    fit(el, new uPlot(opts, columns, el));
    return days.length;
  }

  function draw() {
    if (typeof uPlot === "undefined") return;
    var charts = document.querySelectorAll("[data-chart]");
    Array.prototype.forEach.call(charts, function (el) {
      var data = readData(el);
      if (!data) return;
      var points = el.dataset.chart === "usage" ? usageChart(el, data) : samplesChart(el, data);
      el.dataset.points = String(points);
      el.dataset.drawn = points > 0 ? "1" : "0";
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
