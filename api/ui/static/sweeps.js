// The dashboard's sweeps pages: the list, and a sweep's page with every
// trial's loss curve on one chart (cut trials greyed, the best marked) and
// the trials table. It uses app.js's helpers (window.edlUI) and chart.js.
(function () {
  "use strict";

  function fmtParams(p) {
    return Object.keys(p || {}).sort().map((k) => {
      const v = p[k];
      const s = typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toPrecision(4)) : JSON.stringify(v);
      return k.replace(/^trainer\.builtin\./, "") + "=" + s;
    }).join(" ");
  }

  function listView(ui, view) {
    const { h, api, every, age } = ui;
    const body = h("tbody", {}), err = h("p", { class: "error" });
    view.append(h("h1", {}, "Sweeps"), err,
      h("table", { id: "sweeps" }, h("thead", {}, h("tr", {}, ["ID", "Name", "State", "Trials ended", "Running", "Best", "Age"].map((c) => h("th", {}, c)))), body));
    every(2000, async () => {
      try {
        const list = await api("/v1/sweeps?limit=500");
        err.textContent = "";
        body.textContent = "";
        if (list.sweeps.length === 0) body.append(h("tr", {}, h("td", { colspan: 7, class: "muted" }, "no sweeps yet: edl sweep submit examples/sweep.json")));
        for (const s of list.sweeps) {
          const ended = s.trials.filter((t) => ["completed", "cut", "failed", "cancelled"].includes(t.state)).length;
          const running = s.trials.filter((t) => t.state === "running").length;
          body.append(h("tr", { "data-id": s.id },
            h("td", {}, h("a", { href: "#/sweeps/" + s.id }, s.id)), h("td", {}, s.spec.name), h("td", {}, h("span", { class: "state sweep-" + s.state }, s.state)),
            h("td", {}, ended + "/" + s.trials.length), h("td", {}, String(running)),
            h("td", {}, s.best ? `trial ${s.best.trial}: ${s.best.metric.toPrecision(4)}` : "-"), h("td", { title: s.created_at }, age(s.created_at))));
        }
      } catch (e) { if (e.status !== 401) err.textContent = e.message; }
    });
  }

  function sweepView(ui, view, id) {
    const { h, api, every } = ui;
    const curves = {}; // job id -> {since, points}
    const info = h("p", { id: "sweep-info" }), err = h("p", { class: "error" }), body = h("tbody", {});
    const chart = h("div", { id: "chart-trials" });
    view.append(h("h1", {}, id), info, err,
      h("div", { class: "card chart wide" }, h("h3", {}, "Trials' loss (cut trials grey, the best green)"), chart),
      h("table", { id: "trials" }, h("thead", {}, h("tr", {}, ["Trial", "State", "Rung", "Workers", "Metric", "Step", "Job", "Parameters"].map((c) => h("th", {}, c)))), body));
    every(2000, async () => {
      try {
        const s = await api("/v1/sweeps/" + id);
        err.textContent = "";
        const best = s.best ? s.best.trial : -1;
        info.textContent = `${s.spec.name}: ${s.state}, ${s.trials.length} trials, ${s.spec.metric.name} (${s.spec.metric.mode})` +
          (s.best ? `; best: trial ${s.best.trial}, ${s.best.metric.toPrecision(4)} at rung ${s.best.rung} (${fmtParams(s.best.parameters)})` : "");
        body.textContent = "";
        for (const t of s.trials) {
          body.append(h("tr", { "data-trial": String(t.index), class: "trial-" + t.state + (t.index === best ? " best" : "") },
            h("td", {}, String(t.index) + (t.index === best ? " ★" : "")), h("td", {}, t.state), h("td", {}, t.rung >= 0 ? String(t.rung) : "-"),
            h("td", {}, t.workers ? String(t.workers) : "-"), h("td", {}, t.last_metric ? (t.last_metric.non_finite || t.last_metric.value.toFixed(4)) : "-"),
            h("td", {}, t.last_metric ? String(t.last_metric.step) : "-"),
            h("td", {}, t.job_id ? h("a", { href: "#/jobs/" + t.job_id }, t.job_id) : "-"), h("td", {}, fmtParams(t.parameters))));
        }
        // New progress points of every started trial's job.
        await Promise.all(s.trials.filter((t) => t.job_id).map(async (t) => {
          const c = curves[t.job_id] || (curves[t.job_id] = { since: "", points: [] });
          if (c.done) return;
          const pts = await api(`/v1/jobs/${t.job_id}/progress` + (c.since ? "?since=" + encodeURIComponent(c.since) : ""));
          for (const p of pts.points || []) { if (p.step > 0 && p.loss !== null) c.points.push([Date.parse(p.time), p.loss]); c.since = p.id; }
          if (["completed", "cut", "failed", "cancelled"].includes(t.state) && (pts.points || []).length === 0) c.done = true;
        }));
        const series = s.trials.filter((t) => t.job_id).map((t) => ({
          name: "trial " + t.index, dots: false, points: curves[t.job_id].points,
          cls: t.index === best ? "best" : (t.state === "cut" || t.state === "cancelled" || t.state === "failed") ? "cut" : "trial",
        }));
        series.sort((a, b) => (a.cls === "best") - (b.cls === "best")); // the best drawn last, on top
        edlChart.line(chart, { series, empty: "no steps yet" });
      } catch (e) { if (e.status !== 401) err.textContent = e.message; }
    });
  }

  // route shows the page for path (#/sweeps or #/sweeps/ID) and says
  // whether it was a sweeps path.
  function route(ui, view, path) {
    let m;
    if (path === "/sweeps") { listView(ui, view); return true; }
    if ((m = path.match(/^\/sweeps\/([a-z0-9-]+)$/))) { sweepView(ui, view, m[1]); return true; }
    return false;
  }

  window.edlSweeps = { route };
})();
