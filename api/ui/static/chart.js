// Hand-drawn SVG line charts for the dashboard: time on x, one or more
// series on y, vertical markers for events (resizes, failures). No library:
// a few dozen lines draw what the job page needs, and nothing is fetched.
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const W = 560, H = 210, ML = 52, MR = 14, MT = 10, MB = 26;

  function el(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  // niceStep is a round tick step (1, 2, 5 x 10^n) for a span in about n steps.
  function niceStep(span, n) {
    const raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const f = raw / mag;
    return (f >= 5 ? 10 : f >= 2 ? 5 : f >= 1 ? 2 : 1) * mag;
  }

  function fmtNum(v) {
    const a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(0) + "k";
    if (a >= 1e3) return (v / 1e3).toFixed(1) + "k";
    if (a >= 10 || v === 0) return String(Math.round(v * 10) / 10);
    return v.toPrecision(2);
  }

  function fmtTime(ms) {
    return new Date(ms).toTimeString().slice(0, 8);
  }

  // line draws into container (emptied first). opts: {series: [{name, cls,
  // step, dots, points: [[timeMs, value]]}], markers: [{t, cls, label}],
  // integer: y ticks whole numbers, empty: text when there is no point}.
  function line(container, opts) {
    container.textContent = "";
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" }, container);
    const all = [];
    for (const s of opts.series) for (const p of s.points) all.push(p);
    const ms = opts.markers || [];
    svg.setAttribute("data-points", String(all.length));
    svg.setAttribute("data-markers", String(ms.length));
    if (all.length === 0) {
      el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, svg).textContent = opts.empty || "no data yet";
      return svg;
    }
    let t0 = Infinity, t1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const [t, v] of all) {
      t0 = Math.min(t0, t); t1 = Math.max(t1, t);
      y0 = Math.min(y0, v); y1 = Math.max(y1, v);
    }
    for (const m of ms) { t0 = Math.min(t0, m.t); t1 = Math.max(t1, m.t); }
    if (t1 - t0 < 1000) { t1 = t0 + 1000; }
    y0 = Math.min(0, y0);
    if (y1 <= y0) y1 = y0 + 1;
    let step = niceStep(y1 - y0, 4);
    if (opts.integer) step = Math.max(1, Math.round(step));
    y1 = Math.ceil(y1 / step) * step;
    const x = (t) => ML + (t - t0) / (t1 - t0) * (W - ML - MR);
    const y = (v) => H - MB - (v - y0) / (y1 - y0) * (H - MT - MB);

    const axis = el("g", { class: "axis" }, svg);
    for (let v = y0; v <= y1 + step / 2; v += step) {
      el("line", { x1: ML, x2: W - MR, y1: y(v), y2: y(v) }, axis);
      el("text", { x: ML - 6, y: y(v) + 3, "text-anchor": "end" }, axis).textContent = fmtNum(v);
    }
    const xt = 5;
    for (let i = 0; i <= xt; i++) {
      const t = t0 + (t1 - t0) * i / xt;
      el("text", { x: x(t), y: H - 8, "text-anchor": i === 0 ? "start" : i === xt ? "end" : "middle" }, axis).textContent = fmtTime(t);
    }
    for (const m of ms) {
      const ln = el("line", { x1: x(m.t), x2: x(m.t), y1: MT, y2: H - MB, class: "marker " + m.cls }, svg);
      el("title", {}, ln).textContent = m.label;
    }
    for (const s of opts.series) {
      if (s.points.length === 0) continue;
      let d = "";
      s.points.forEach(([t, v], i) => {
        if (i === 0) d += `M${x(t).toFixed(1)},${y(v).toFixed(1)}`;
        else if (s.step) d += `H${x(t).toFixed(1)}V${y(v).toFixed(1)}`;
        else d += `L${x(t).toFixed(1)},${y(v).toFixed(1)}`;
      });
      if (s.step) d += `H${(W - MR).toFixed(1)}`;
      const path = el("path", { d, class: "line " + (s.cls || ""), "data-series": s.name }, svg);
      path.setAttribute("data-values", s.points.map((p) => p[1]).join(","));
      if (s.dots) {
        const every = Math.max(1, Math.ceil(s.points.length / 300));
        s.points.forEach(([t, v], i) => {
          if (i % every !== 0 && i !== s.points.length - 1) return;
          const c = el("circle", { cx: x(t).toFixed(1), cy: y(v).toFixed(1), r: 2.2, class: "pt", "data-v": String(v) }, svg);
          el("title", {}, c).textContent = `${fmtTime(t)}  ${s.name} ${fmtNum(v)}`;
        });
      }
    }
    return svg;
  }

  window.edlChart = { line, fmtNum, fmtTime };
})();
