// linerate report: draws the charts described in #lr-chart-data with uPlot.
// Generic on purpose: every chart is axes + series + aligned data built in
// Rust (src/report/charts.rs); nothing here knows what a test is.
//
// After a chart's first draw, each series is checked to have changed pixels
// on the canvas, and the figure records it (data-rendered, data-series-drawn,
// one <li> per series in .drawn). Script errors land in #lr-errors. The
// browser test reads both from the DOM.
(function () {
  'use strict';
  var errors = window.lrErrors || (window.lrErrors = []);
  var origError = console.error;
  console.error = function () {
    errors.push('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return origError.apply(console, arguments);
  };

  function showErrors() {
    var el = document.getElementById('lr-errors');
    if (!el) return;
    el.dataset.count = String(errors.length);
    if (errors.length) {
      el.hidden = false;
      el.textContent = 'Errors while drawing this page:\n' + errors.join('\n');
    }
  }

  var PREFIXES = [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
  function si(v, digits) {
    var a = Math.abs(v);
    for (var i = 0; i < PREFIXES.length; i++) {
      if (a >= PREFIXES[i][0]) {
        return (v / PREFIXES[i][0]).toFixed(digits) + ' ' + PREFIXES[i][1];
      }
    }
    return v.toFixed(a >= 100 || v === 0 ? 0 : digits) + ' ';
  }
  // Values as the tables write them: pps, bit/s, %, s, counts.
  function fmt(v, unit, short) {
    if (v == null || !isFinite(v)) return '–';
    var d = short ? 1 : 3;
    switch (unit) {
      case 'pps': return si(v, d) + 'pps';
      case 'bit/s': return si(v, d) + 'bit/s';
      case '%': return v.toFixed(short ? (v < 1 ? 2 : 1) : 3) + ' %';
      case 's': return v.toFixed(short ? 0 : 2) + ' s';
      case 'µs': return v.toFixed(short ? 0 : 1) + ' µs';
      case 'count': return Math.round(v).toLocaleString('en-US');
      default: return String(v);
    }
  }

  // Counts tick at whole numbers only.
  var COUNT_INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 1e6, 1e7, 1e8, 1e9];

  function unitOf(chart, scale) {
    if (scale === 'x') return chart.x.unit;
    for (var i = 0; i < chart.y.length; i++) {
      if (chart.y[i].scale === scale) return chart.y[i].unit;
    }
    return '';
  }

  // Tick labels with one prefix per axis and as many decimals as the tick
  // step needs: 0, 50 k, 100 k rather than 0.0, 50.0 k, 100.0 k.
  function axisValues(unit) {
    return function (u, splits, axisIdx, space, incr) {
      var top = Math.max.apply(null, splits.map(Math.abs));
      var div = 1, prefix = '';
      if (unit === 'pps' || unit === 'bit/s') {
        for (var i = 0; i < PREFIXES.length; i++) {
          if (top >= PREFIXES[i][0]) { div = PREFIXES[i][0]; prefix = PREFIXES[i][1]; break; }
        }
      }
      var step = incr > 0 ? incr / div : 1;
      var decimals = 0;
      while (unit !== 'count' && decimals < 6 &&
             Math.abs(Math.round(step * Math.pow(10, decimals)) - step * Math.pow(10, decimals)) > 1e-6) {
        decimals++;
      }
      var suffix = unit === 'count' ? '' : (unit === '%' || unit === 's' ? ' ' + unit : ' ' + prefix + unit);
      return splits.map(function (v) { return (v / div).toFixed(decimals) + suffix; });
    };
  }

  // Counts the pixels each series changed when it was drawn the first time.
  function drawCheck(fig, chart) {
    var before = null;
    var counts = [];
    var done = false;
    // Read back through a scratch canvas made for frequent reads, not
    // uPlot's own (which would then be slow to draw on).
    var scratch = document.createElement('canvas').getContext('2d', { willReadFrequently: true });
    function grab(u) {
      var b = u.bbox;
      if (b.width < 1 || b.height < 1) return null;
      scratch.canvas.width = b.width;
      scratch.canvas.height = b.height;
      scratch.drawImage(u.ctx.canvas, b.left, b.top, b.width, b.height, 0, 0, b.width, b.height);
      return scratch.getImageData(0, 0, b.width, b.height).data;
    }
    return {
      drawAxes: function (u) { if (!done) before = grab(u); },
      drawSeries: function (u, si) {
        if (done || !before) return;
        var after = grab(u);
        var changed = 0;
        for (var i = 0; i < after.length; i += 4) {
          if (after[i] !== before[i] || after[i + 1] !== before[i + 1] ||
              after[i + 2] !== before[i + 2] || after[i + 3] !== before[i + 3]) changed++;
        }
        counts[si] = changed;
        before = after;
      },
      draw: function () {
        if (done) return;
        done = true;
        var list = document.createElement('ul');
        list.className = 'drawn';
        list.hidden = true;
        var drawn = 0;
        chart.series.forEach(function (s, i) {
          var px = counts[i + 1] || 0;
          if (px > 0) drawn++;
          var li = document.createElement('li');
          li.dataset.label = s.label;
          li.dataset.pixels = String(px);
          li.dataset.points = String(chart.data[i + 1].filter(function (v) { return v != null; }).length);
          list.appendChild(li);
        });
        fig.appendChild(list);
        fig.dataset.seriesDrawn = String(drawn);
        fig.dataset.rendered = drawn === chart.series.length ? 'ok' : 'incomplete';
      }
    };
  }

  // Vertical lines with a label at chosen x values (a saturation point).
  function drawMarks(chart) {
    return function (u) {
      var marks = chart.marks || [];
      if (!marks.length) return;
      var ctx = u.ctx, b = u.bbox, dpr = window.devicePixelRatio || 1;
      ctx.save();
      ctx.beginPath();
      ctx.rect(b.left, b.top, b.width, b.height);
      ctx.clip();
      marks.forEach(function (m, i) {
        var x = Math.round(u.valToPos(m.x, 'x', true));
        ctx.strokeStyle = '#b3261e';
        ctx.lineWidth = 1.5 * dpr;
        ctx.setLineDash([4 * dpr, 3 * dpr]);
        ctx.beginPath();
        ctx.moveTo(x, b.top);
        ctx.lineTo(x, b.top + b.height);
        ctx.stroke();
        ctx.setLineDash([]);
        ctx.fillStyle = '#b3261e';
        ctx.font = (11 * dpr) + 'px system-ui, sans-serif';
        var w = ctx.measureText(m.label).width;
        var tx = x + 4 * dpr + w > b.left + b.width ? x - 4 * dpr - w : x + 4 * dpr;
        ctx.fillText(m.label, tx, b.top + (14 + 14 * i) * dpr);
      });
      ctx.restore();
    };
  }

  function build(chart, fig) {
    var mount = fig.querySelector('.plot');
    var check = drawCheck(fig, chart);
    var labels = chart.x_labels || [];
    // Category charts (one bar per core) put each category at x = 0, 1, ...
    var xRange = labels.length
      ? function () { return [-0.5, labels.length - 0.5]; }
      : function (u, min, max) { return [Math.min(0, min), max]; };
    var scales = { x: { time: false, range: xRange } };
    chart.y.forEach(function (a) {
      scales[a.scale] = {
        // Headroom above, and a sliver below the axis minimum so that a
        // series at zero (no loss) is a visible line, not the axis itself.
        range: function (u, min, max) {
          var lo = a.min != null ? Math.min(a.min, min) : min;
          var hi = max > lo ? max + (max - lo) * 0.08 : lo + 1;
          return [lo - (hi - lo) * 0.03, hi];
        }
      };
    });
    var axes = [labels.length ? {
      label: chart.x.label,
      values: function (u, splits) {
        return splits.map(function (v) { return v === Math.round(v) && labels[v] != null ? labels[v] : ''; });
      },
      incrs: [1],
      grid: { show: false }
    } : {
      label: chart.x.label + ' (' + chart.x.unit + ')',
      values: axisValues(chart.x.unit),
      incrs: chart.x.unit === 'count' ? COUNT_INCRS : undefined,
      grid: { stroke: '#e8ebf0' }
    }];
    chart.y.forEach(function (a, i) {
      axes.push({
        scale: a.scale,
        label: a.label + ' (' + a.unit + ')',
        side: i === 0 ? 3 : 1,
        size: 78,
        values: axisValues(a.unit),
        incrs: a.unit === 'count' ? COUNT_INCRS : undefined,
        grid: i === 0 ? { stroke: '#e8ebf0' } : { show: false }
      });
    });
    var n = chart.data[0].length;
    var stepped = chart.steps ? uPlot.paths.stepped({ align: 1 }) : undefined;
    var noLine = function () { return null; };
    var series = [{
      label: chart.x.unit === 's' ? 'time' : chart.x.label,
      value: function (u, v) { return labels.length ? (labels[v] || '–') : fmt(v, chart.x.unit); }
    }];
    var bars = uPlot.paths.bars ? uPlot.paths.bars({ size: [0.6, 80] }) : undefined;
    chart.series.forEach(function (s) {
      var unit = unitOf(chart, s.scale);
      if (s.line === 'bars') {
        series.push({
          label: s.label,
          scale: s.scale,
          stroke: s.color,
          fill: s.color,
          width: 0,
          paths: bars,
          points: { show: false },
          value: function (u, v) { return fmt(v, unit); }
        });
        return;
      }
      series.push({
        label: s.label,
        scale: s.scale,
        stroke: s.color,
        width: s.line === 'solid' ? 2 : 1.5,
        dash: s.line === 'dashed' ? [6, 4] : s.line === 'dotted' ? [2, 3] : undefined,
        spanGaps: !!s.span_gaps,
        paths: s.line === 'points' ? noLine : stepped,
        points: s.line === 'points'
          ? { show: true, size: 7, fill: s.color, width: 1 }
          : { show: !chart.steps && s.line === 'solid' && n <= 60, size: 5, fill: s.color },
        value: function (u, v) { return fmt(v, unit); }
      });
    });
    var opts = {
      width: Math.max(320, mount.clientWidth || 900),
      height: 300,
      scales: scales,
      axes: axes,
      series: series,
      legend: { live: true },
      cursor: {
        drag: { x: true, y: false },
        focus: { prox: 24 },
        // On a step chart the value under the cursor is the step it is in,
        // not the nearest step start.
        dataIdx: function (u, sidx, closest, xv) {
          if (!chart.steps) return closest;
          var xs = u.data[0], i = closest;
          while (i > 0 && xs[i] > xv) i--;
          while (i + 1 < xs.length && xs[i + 1] <= xv) i++;
          return i;
        }
      },
      focus: { alpha: 0.35 },
      hooks: {
        drawAxes: [check.drawAxes],
        drawSeries: [check.drawSeries],
        draw: [drawMarks(chart), check.draw]
      }
    };
    var plot = new uPlot(opts, chart.data, mount);
    plot.root.setAttribute('aria-label', chart.title);
    return plot;
  }

  function main() {
    var el = document.getElementById('lr-chart-data');
    var model = JSON.parse(el.textContent);
    var plots = [];
    var rendered = 0;
    model.charts.forEach(function (chart) {
      var fig = document.getElementById(chart.id);
      if (!fig) {
        errors.push('no element for chart ' + chart.id);
        return;
      }
      try {
        plots.push([build(chart, fig), fig]);
        rendered++;
      } catch (e) {
        fig.dataset.rendered = 'error';
        errors.push('chart ' + chart.id + ': ' + (e && e.stack || e));
      }
    });
    document.body.dataset.chartsBuilt = String(rendered);
    // What is wider than the window (tests read it): the page itself, or
    // a table's scroll box.
    var wide = [];
    if (document.documentElement.scrollWidth > document.documentElement.clientWidth + 1) wide.push('page');
    document.querySelectorAll('.scroll').forEach(function (e) {
      if (e.scrollWidth > e.clientWidth + 1) {
        var t = e.querySelector('table');
        wide.push('table.' + (t && t.className ? t.className.split(' ')[0] : 'unnamed'));
      }
    });
    document.body.dataset.overflow = wide.join(' ');
    // Charts follow the page width (window resize, print).
    function fit() {
      plots.forEach(function (p) {
        var w = p[1].querySelector('.plot').clientWidth;
        if (w > 0 && Math.abs(w - p[0].width) > 4) p[0].setSize({ width: w, height: 300 });
      });
    }
    var timer = null;
    window.addEventListener('resize', function () {
      clearTimeout(timer);
      timer = setTimeout(fit, 150);
    });
    window.addEventListener('beforeprint', function () {
      document.querySelectorAll('details').forEach(function (d) { d.open = true; });
      fit();
    });
  }

  try {
    if (typeof uPlot !== 'function') throw new Error('uPlot did not load');
    main();
  } catch (e) {
    errors.push(String(e && e.stack || e));
  }
  showErrors();
  // Charts draw in a microtask; their errors, and late ones (resize,
  // hover), show up too.
  setTimeout(showErrors, 0);
  setTimeout(showErrors, 1000);
  window.addEventListener('error', function () { setTimeout(showErrors, 0); });
})();
