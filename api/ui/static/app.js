// The edl dashboard: jobs list, job page (charts, events, checkpoints,
// logs) and the admin cluster page, over the /v1 API with the user's token.
(function () {
  "use strict";
  const TOKEN_KEY = "edl-token";
  const STATES = ["pending", "starting", "running", "suspended", "cancelling", "succeeded", "failed", "cancelled"];
  const $ = (sel, root) => (root || document).querySelector(sel);
  let timers = [];

  function stopTimers() { timers.forEach(clearInterval); timers = []; }
  function every(ms, fn) { fn(); timers.push(setInterval(fn, ms)); }

  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) {
      if (k === "class") e.className = attrs[k];
      else if (k === "style") e.style.cssText = attrs[k]; // CSSOM: allowed by the CSP, unlike a style attribute
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
    for (const c of kids.flat()) if (c != null) e.append(c instanceof Node ? c : String(c));
    return e;
  }

  function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

  class APIError extends Error {
    constructor(status, problem) {
      super(problem.title + (problem.detail ? ": " + problem.detail : ""));
      this.status = status; this.problem = problem;
    }
  }

  async function api(path, opts) {
    opts = opts || {};
    const headers = Object.assign({ Authorization: "Bearer " + token() }, opts.headers || {});
    const resp = await fetch(path, Object.assign({}, opts, { headers }));
    if (resp.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin("the token was refused; sign in again");
      throw new APIError(401, { title: "unauthorized" });
    }
    if (!resp.ok) {
      let p = { title: resp.statusText };
      try { p = await resp.json(); } catch (e) { /* not a problem body */ }
      throw new APIError(resp.status, p);
    }
    return opts.raw ? resp : resp.json();
  }

  function stateSpan(st) { return h("span", { class: "state state-" + st }, st); }

  function age(iso) {
    const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (s < 60) return Math.floor(s) + "s";
    if (s < 3600) return Math.floor(s / 60) + "m";
    if (s < 172800) return Math.floor(s / 3600) + "h";
    return Math.floor(s / 86400) + "d";
  }

  function fraction(j) {
    if (j.state === "succeeded") return 1;
    const b = j.spec.trainer && j.spec.trainer.builtin;
    if (b && b.epochs > 0 && b.dataset && b.dataset.samples > 0) return Math.min(1, j.progress.samples / (b.epochs * b.dataset.samples));
    // Live mode: the spec's data set times the epochs the program's loop reported.
    const e = j.spec.trainer && j.spec.trainer.exec;
    if (e && e.dataset && e.dataset.samples > 0 && j.progress.total_epochs > 0) return Math.min(1, j.progress.samples / (j.progress.total_epochs * e.dataset.samples));
    if (e && e.total_steps > 0) return Math.min(1, j.progress.step / e.total_steps);
    if (j.progress.total_epochs > 0) return Math.min(1, j.progress.epoch / j.progress.total_epochs);
    return -1;
  }

  // A diverged loss is null in JSON, named in loss_non_finite ("NaN", ...).
  function fmtLoss(p) { return p.loss_non_finite || p.loss.toFixed(4); }
  function progressCell(j) {
    const f = fraction(j);
    if (f < 0) return h("span", { class: "muted" }, "-");
    return h("span", {}, h("span", { class: "bar" }, h("span", { style: "width:" + (100 * f).toFixed(1) + "%" })), (100 * f).toFixed(0) + "%");
  }

  // A deadline job's due time, the planner's expected finish and an
  // at-risk badge; an ended one's result (null for other jobs).
  function deadlineInfo(j) {
    if (!j.deadline) return null;
    const due = Date.parse(j.deadline), t = (ms) => new Date(ms).toLocaleString();
    const badge = (cls, text) => h("span", { class: "badge " + cls }, text);
    if (j.state === "succeeded") {
      // The planner's record of the end (what its deadline event says);
      // before its teardown, the record's last write.
      const r = j.deadline_result, late = r ? !r.met : Date.parse(j.updated_at) > due;
      return { due: t(due), result: badge(late ? "missed" : "met", late ? "missed" : "met") };
    }
    if (j.state === "failed") return { due: t(due), result: badge("missed", "missed") };
    return { due: t(due), expected: j.expected_finish ? t(Date.parse(j.expected_finish)) : "", risk: j.at_risk ? badge("at-risk", "at risk") : null };
  }

  function deadlineCell(j) {
    const d = deadlineInfo(j);
    if (!d) return "-";
    return h("span", { class: "deadline", title: d.expected ? "expected finish " + d.expected : "" }, d.due, " ", d.result || d.risk || "");
  }

  function showLogin(msg) {
    stopTimers();
    $("#view").textContent = "";
    $("#login").hidden = false;
    $("#login-error").textContent = msg || "";
    $("#signout").hidden = true;
    $("#whoami").textContent = "";
    $("#token").focus();
  }

  async function whoami() {
    try {
      const me = await api("/v1/tenants/me");
      $("#whoami").textContent = me.name + (me.admin ? " (admin)" : "");
      $("#signout").hidden = false;
    } catch (e) { /* shown by the view */ }
  }

  // ---- jobs list ----
  function jobsView(view) {
    const params = new URLSearchParams(location.hash.split("?")[1] || "");
    const filter = params.get("state") || "";
    const sel = h("select", { id: "state-filter", onchange: (e) => { location.hash = "#/" + (e.target.value ? "?state=" + e.target.value : ""); } },
      h("option", { value: "" }, "all states"), STATES.map((s) => { const o = h("option", { value: s }, s); if (s === filter) o.selected = true; return o; }));
    const body = h("tbody", {});
    const err = h("p", { class: "error" });
    view.append(h("h1", {}, "Jobs"), h("div", { class: "toolbar" }, h("label", {}, "State ", sel), err),
      h("table", { id: "jobs" }, h("thead", {}, h("tr", {}, ["ID", "Name", "State", "Tenant", "Workers", "Progress", "Loss", "Deadline", "Age"].map((c) => h("th", {}, c)))), body));
    every(2000, async () => {
      try {
        const q = "/v1/jobs?limit=500" + (filter ? "&status=" + filter : "");
        const list = await api(q);
        err.textContent = "";
        body.textContent = "";
        if (list.jobs.length === 0) body.append(h("tr", {}, h("td", { colspan: 9, class: "muted" }, "no jobs" + (filter ? " in state " + filter : "") + " yet: edl submit examples/job.json")));
        for (const j of list.jobs) {
          body.append(h("tr", { "data-id": j.id },
            h("td", {}, h("a", { href: "#/jobs/" + j.id }, j.id)), h("td", {}, j.spec.name), h("td", {}, stateSpan(j.state)),
            h("td", {}, j.tenant), h("td", {}, j.workers.current + "/" + j.workers.target), h("td", {}, progressCell(j)),
            h("td", {}, j.progress.step > 0 ? fmtLoss(j.progress) : "-"), h("td", {}, deadlineCell(j)), h("td", { title: j.created_at }, age(j.created_at))));
        }
      } catch (e) { if (e.status !== 401) err.textContent = e.message; }
    });
  }

  // ---- job page ----
  function isFailure(ev) {
    return ev.type === "error" || (ev.type === "worker" && /straggler|fail|lost|died|killed/i.test(ev.message));
  }

  function jobView(view, id) {
    const st = { job: null, points: [], since: "", events: [], after: "", logsOK: null, workersOK: null, logWorker: "", shownWorker: "" };
    const title = h("h1", {}, id), info = h("dl", { class: "kv", id: "job-info" }), err = h("p", { class: "error" });
    const chart = (cid, name) => h("div", { class: "card chart" }, h("h3", {}, name), h("div", { id: cid }));
    const evBody = h("tbody", {}), ckBody = h("tbody", {}), wkBody = h("tbody", {}), logs = h("pre", { class: "logs", id: "logs" });
    const logsWho = h("span", { class: "muted", id: "logs-worker" });
    const streamSel = h("select", { id: "logs-stream", onchange: () => loadLogs() }, h("option", { value: "stdout" }, "stdout"), h("option", { value: "stderr" }, "stderr"));
    const logsCard = h("div", { class: "card", id: "logs-card", hidden: "" }, h("h2", {}, "Logs ", logsWho), h("div", { class: "toolbar" }, h("label", {}, "Stream ", streamSel)), logs);
    const workersCard = h("div", { class: "card", id: "workers-card", hidden: "" }, h("h2", {}, "Workers"),
      h("table", { id: "workers" }, h("thead", {}, h("tr", {}, ["Index", "Worker", "Rank", "State", "Exit", "Node", "Started", ""].map((c) => h("th", {}, c)))), wkBody));
    const scaleIn = h("input", { type: "number", min: "0", id: "scale-n", style: "width:5em" });
    const actions = h("div", { class: "toolbar" },
      h("label", {}, "Pin workers ", scaleIn), h("button", { id: "scale-button", onclick: async () => {
        try { await api("/v1/jobs/" + id + "/scale", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ workers: Number(scaleIn.value) }) }); err.textContent = ""; } catch (e) { err.textContent = e.message; }
      } }, "Scale"),
      h("button", { id: "cancel-button", onclick: async () => {
        if (!confirm("Cancel " + id + "?")) return;
        try { await api("/v1/jobs/" + id, { method: "DELETE" }); } catch (e) { err.textContent = e.message; }
      } }, "Cancel job"), err);
    view.append(h("p", {}, h("a", { href: "#/" }, "← jobs")), title, h("div", { class: "card" }, info, actions),
      h("div", { class: "grid" }, chart("chart-loss", "Loss"), chart("chart-rate", "Samples/s"), chart("chart-workers", "Workers (dashed: target; amber: resize, red: failure)")),
      h("div", { class: "grid" },
        h("div", { class: "card" }, h("h2", {}, "Events"), h("div", { class: "events" }, h("table", { id: "events" }, evBody))),
        h("div", { class: "card" }, h("h2", {}, "Checkpoints"), h("table", { id: "checkpoints" },
          h("thead", {}, h("tr", {}, ["Step", "Epoch", "World", "Size", "Created", ""].map((c) => h("th", {}, c)))), ckBody))),
      workersCard, logsCard);

    function renderInfo(j) {
      title.textContent = j.spec.name + " ";
      title.append(h("span", { class: "muted" }, j.id));
      info.textContent = "";
      const row = (k, v) => info.append(h("dt", {}, k), h("dd", {}, v));
      row("State", stateSpan(j.state));
      if (j.reason) row("Reason", j.reason);
      row("Tenant", j.tenant);
      row("Workers", `${j.workers.current} current, ${j.workers.target} target (range ${j.spec.workers.min}..${j.spec.workers.max}${j.workers.pinned ? ", pinned " + j.workers.pinned : ""})`);
      const unreported = j.spec.trainer.kind === "exec" && !j.progress.step && !j.progress.samples && !j.progress.epoch;
      row("Progress", unreported ? "none reported by the program (steps it writes to $EDL_METRICS_FILE show here)"
        : h("span", {}, progressCell(j), ` epoch ${j.progress.epoch + 1}, step ${j.progress.step}`));
      // A program that reports steps and no samples has its speed in steps/s.
      const rateUnit = !j.progress.samples && j.progress.step > 0 ? "steps/s" : "samples/s";
      if (j.progress.step > 0) row(`Loss / ${rateUnit}`, `${fmtLoss(j.progress)} / ${edlChart.fmtNum(j.progress.samples_per_s)}`);
      const dl = deadlineInfo(j);
      if (dl) {
        row("Deadline", h("span", { id: "deadline" }, dl.due + " (" + (j.spec.deadline_policy || "strict") + ")"));
        if (dl.result) row("Result", dl.result);
        else row("Expected finish", h("span", { id: "expected-finish" }, dl.expected || "none planned", " ", dl.risk || ""));
      }
      row("Created", new Date(j.created_at).toLocaleString() + " (" + age(j.created_at) + " ago)");
    }

    function renderCharts() {
      const t = (p) => Date.parse(p.time);
      const pts = st.points;
      const markers = [];
      for (const ev of st.events) {
        if (ev.type === "scale") markers.push({ t: Date.parse(ev.time), cls: "marker-resize", label: ev.message });
        else if (isFailure(ev)) markers.push({ t: Date.parse(ev.time), cls: "marker-failure", label: ev.message });
      }
      const resizeOnly = markers.filter((m) => m.cls === "marker-resize");
      const trained = pts.filter((p) => p.step > 0);
      edlChart.line($("#chart-loss"), { series: [{ name: "loss", dots: true, points: trained.filter((p) => p.loss !== null).map((p) => [t(p), p.loss]) }], markers: resizeOnly, empty: "no steps yet" });
      edlChart.line($("#chart-rate"), { series: [{ name: trained.length && !trained[trained.length - 1].samples ? "steps/s" : "samples/s", dots: false, points: trained.map((p) => [t(p), p.samples_per_s]) }], markers: resizeOnly, empty: "no steps yet" });
      const target = pts.map((p) => [t(p), p.workers_target]);
      for (const ev of st.events) if (ev.type === "scale" && ev.data && typeof ev.data.to === "number") target.push([Date.parse(ev.time), ev.data.to]);
      target.sort((a, b) => a[0] - b[0]);
      edlChart.line($("#chart-workers"), { integer: true, markers, empty: "no workers yet", series: [
        { name: "target", cls: "target", step: true, points: target },
        { name: "workers", step: true, dots: true, points: pts.map((p) => [t(p), p.workers_current]) },
      ] });
    }

    function renderEvents() {
      evBody.textContent = "";
      for (const ev of st.events.slice().reverse()) {
        evBody.append(h("tr", { class: "ev-" + ev.type }, h("td", { class: "muted" }, new Date(ev.time).toLocaleTimeString()),
          h("td", { class: "type" }, ev.type), h("td", { class: "msg" }, ev.message)));
      }
    }

    async function download(step) {
      try {
        const resp = await api(`/v1/jobs/${id}/checkpoints/${step}/model`, { raw: true });
        const blob = await resp.blob();
        const a = h("a", { href: URL.createObjectURL(blob), download: `${id}-step${step}.edlm` });
        document.body.append(a); a.click(); a.remove();
      } catch (e) { err.textContent = e.message; }
    }

    async function loadCheckpoints() {
      try {
        const l = await api(`/v1/jobs/${id}/checkpoints`);
        ckBody.textContent = "";
        if (l.checkpoints.length === 0) ckBody.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "none committed yet")));
        for (const c of l.checkpoints) {
          ckBody.append(h("tr", {}, h("td", {}, c.step), h("td", {}, c.epoch), h("td", {}, c.world_size), h("td", {}, edlChart.fmtNum(c.size_bytes) + "B"),
            h("td", {}, new Date(c.created_at).toLocaleTimeString()),
            h("td", {}, h("a", { href: "#", class: "download", "data-step": c.step, onclick: (e) => { e.preventDefault(); download(c.step); } }, "download model"))));
        }
      } catch (e) {
        ckBody.textContent = "";
        ckBody.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, e.status === 503 ? "no checkpoint store configured" : e.message)));
      }
    }

    // The job's workers, finished ones included (they stay after the job
    // ends); a click shows that worker's log.
    async function loadWorkers() {
      if (st.workersOK === false) return;
      try {
        const l = await api(`/v1/jobs/${id}/workers`);
        st.workersOK = true;
        workersCard.hidden = l.workers.length === 0;
        wkBody.textContent = "";
        for (const w of l.workers) {
          const pick = h("a", { href: "#", class: "show-log", onclick: (e) => { e.preventDefault(); st.logWorker = w.id; loadLogs(); } }, "log");
          wkBody.append(h("tr", { "data-worker": w.id, class: w.id === st.shownWorker ? "shown" : "" }, h("td", {}, w.index), h("td", {}, w.id),
            h("td", {}, w.rank >= 0 ? w.rank + " (gen " + w.generation + ")" : "-"), h("td", {}, w.state + (w.member_state ? " / " + w.member_state : "")),
            h("td", {}, w.exit_code != null ? w.exit_code : "-"), h("td", {}, w.node), h("td", {}, w.started ? new Date(w.started).toLocaleTimeString() : "-"), h("td", {}, pick)));
        }
      } catch (e) {
        // 503: this server lists no workers.
        st.workersOK = e.status === 503 ? false : null;
      }
    }

    async function loadLogs() {
      if (st.logsOK === false) return;
      const q = "stream=" + streamSel.value + "&tail=200" + (st.logWorker ? "&worker=" + encodeURIComponent(st.logWorker) : "");
      try {
        const resp = await api(`/v1/jobs/${id}/logs?` + q, { raw: true });
        const text = await resp.text();
        st.logsOK = true;
        st.shownWorker = resp.headers.get("X-Edl-Worker") || "";
        logsWho.textContent = "(" + streamSel.value + " of " + st.shownWorker + ")";
        logsCard.hidden = false;
        logs.textContent = text || "(nothing written to " + streamSel.value + ")";
      } catch (e) {
        // 503: no log source; 404: no worker or no log yet (tried again).
        if (e.status === 503) st.logsOK = false;
      }
    }

    let tick = 0;
    every(1000, async () => {
      try {
        const [j, prog, evs] = await Promise.all([
          api("/v1/jobs/" + id),
          api(`/v1/jobs/${id}/progress` + (st.since ? "?since=" + encodeURIComponent(st.since) : "")),
          api(`/v1/jobs/${id}/events?limit=500` + (st.after ? "&after=" + encodeURIComponent(st.after) : "")),
        ]);
        st.job = j;
        st.points.push(...prog.points); if (prog.next) st.since = prog.next;
        if (st.points.length > 20000) st.points.splice(0, st.points.length - 20000);
        st.events.push(...evs.events); if (evs.next) st.after = evs.next;
        renderInfo(j); renderCharts(); if (evs.events.length) renderEvents();
        if (tick % 5 === 0) { loadCheckpoints(); loadWorkers(); loadLogs(); }
        tick++;
      } catch (e) { if (e.status !== 401) err.textContent = e.message; }
    });
  }

  // ---- cluster page (admins) ----
  function clusterView(view) {
    const nodes = h("tbody", {}), queue = h("tbody", {}), tenants = h("tbody", {}), err = h("p", { class: "error", id: "cluster-error" });
    const tbl = (id, cols, body) => h("table", { id }, h("thead", {}, h("tr", {}, cols.map((c) => h("th", {}, c)))), body);
    view.append(h("h1", {}, "Cluster"), err,
      h("div", { class: "card" }, h("h2", {}, "Nodes"), tbl("nodes", ["Node", "GPU class", "GPUs free/total", "CPU slots free/total", "Held by"], nodes)),
      h("div", { class: "card" }, h("h2", {}, "Queue"), tbl("queue", ["Job", "Tenant", "State", "Workers", "Waiting because"], queue)),
      h("div", { class: "card" }, h("h2", {}, "Tenants"), tbl("tenants", ["Tenant", "GPU quota", "Weight", "GPUs held", "Jobs"], tenants)));
    every(2000, async () => {
      let c;
      try { c = await api("/v1/cluster"); err.textContent = ""; } catch (e) {
        if (e.status === 403) err.textContent = "The cluster page is for admins: sign out and sign in with an admin token (edl dev keeps one in <data-dir>/tokens.json).";
        else if (e.status !== 401) err.textContent = e.message;
        return;
      }
      nodes.textContent = "";
      for (const n of (c.capacity ? c.capacity.nodes : [])) {
        const holders = c.jobs.filter((j) => j.placement && (j.placement[n.id] || j.placement[n.name]))
          .map((j) => { const w = j.placement[n.id] || j.placement[n.name]; return `${j.job} (${j.tenant}): ${w} worker${w === 1 ? "" : "s"}${j.gpus ? ", " + (w * j.gpus / Math.max(1, j.workers.current)) + " GPU" : ""}`; });
        nodes.append(h("tr", {}, h("td", {}, n.name || n.id), h("td", {}, n.class && n.class.model ? `${n.class.model} ${n.class.memory_mib} MiB` : "CPU"),
          h("td", {}, `${n.free_gpus}/${n.gpus}`), h("td", {}, `${n.free_cpu_slots}/${n.cpu_slots}`), h("td", { class: "msg" }, holders.concat(n.foreign_gpus > 0 ? [`other Nomad jobs: ${n.foreign_gpus} GPU`] : []).join("; ") || "-")));
      }
      if (!c.capacity) nodes.append(h("tr", {}, h("td", { colspan: 5, class: "muted" }, c.capacity_error || "no cluster attached")));
      queue.textContent = "";
      const waiting = c.jobs.filter((j) => j.state === "pending" || j.state === "suspended");
      if (waiting.length === 0) queue.append(h("tr", {}, h("td", { colspan: 5, class: "muted" }, "nothing waits")));
      for (const j of waiting) {
        queue.append(h("tr", {}, h("td", {}, j.job), h("td", {}, j.tenant), h("td", {}, stateSpan(j.state)),
          h("td", {}, j.workers.current + "/" + j.workers.target), h("td", { class: "msg" }, j.reason || "-")));
      }
      tenants.textContent = "";
      for (const t of c.tenants) {
        const jobsBy = Object.entries(t.usage.jobs || {}).map(([s, n]) => `${n} ${s}`).join(", ");
        tenants.append(h("tr", {}, h("td", {}, t.name + (t.admin ? " (admin)" : "")), h("td", {}, t.gpu_quota || "no cap"), h("td", {}, t.weight),
          h("td", {}, t.usage.gpus != null ? t.usage.gpus : "-"), h("td", {}, jobsBy || "-")));
      }
    });
  }

  // A link with #token=... (edl dev's banner prints one) could sign this tab
  // into any tenant someone else chose (login CSRF): drop it from the URL,
  // say which tenant it is and sign in only if the user agrees.
  async function confirmLinkToken(tok) {
    stopTimers();
    $("#view").textContent = "";
    $("#login").hidden = true;
    const box = $("#link-login"), text = $("#link-login-text"), accept = $("#link-login-accept");
    box.hidden = false;
    accept.hidden = true;
    text.textContent = "Checking the link's token…";
    const done = () => { box.hidden = true; accept.onclick = null; $("#link-login-reject").onclick = null; route(); };
    $("#link-login-reject").onclick = done;
    let me = null;
    try {
      const resp = await fetch("/v1/tenants/me", { headers: { Authorization: "Bearer " + tok } });
      if (resp.ok) me = await resp.json();
    } catch (e) { /* refused below */ }
    if (!me) {
      text.textContent = "The link's token was refused: this tab stays as it was.";
      return;
    }
    const who = me.name + (me.admin ? " (admin)" : "");
    const now = $("#whoami").textContent;
    text.textContent = "The link you opened signs this tab in as tenant " + who + "." +
      (token() && now ? " You are signed in as " + now + " now." : "") + " Sign in as " + who + "? Only agree if you made or trust this link.";
    accept.textContent = "Sign in as " + me.name;
    accept.hidden = false;
    accept.onclick = () => { sessionStorage.setItem(TOKEN_KEY, tok); done(); };
  }

  function route() {
    stopTimers();
    const tm = location.hash.match(/[#&]token=([^&]+)/);
    if (tm) {
      history.replaceState(null, "", location.pathname + "#/");
      confirmLinkToken(decodeURIComponent(tm[1]));
      return;
    }
    $("#link-login").hidden = true;
    const view = $("#view");
    view.textContent = "";
    if (!token()) { showLogin(); return; }
    $("#login").hidden = true;
    const path = location.hash.replace(/^#/, "").split("?")[0] || "/";
    document.querySelectorAll("header nav a").forEach((a) => a.classList.remove("active"));
    let m;
    if ((m = path.match(/^\/jobs\/([a-z0-9-]+)$/))) { jobView(view, m[1]); }
    else if (path === "/cluster") { $("#nav-cluster").classList.add("active"); clusterView(view); }
    else if (path.startsWith("/sweeps") && window.edlSweeps.route({ h, api, every, age }, view, path)) { $("#nav-sweeps").classList.add("active"); } // sweeps.js
    else { $("#nav-jobs").classList.add("active"); jobsView(view); }
    whoami();
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("#login-form").addEventListener("submit", (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, $("#token").value.trim());
      $("#token").value = "";
      route();
    });
    $("#signout").addEventListener("click", (e) => { e.preventDefault(); sessionStorage.removeItem(TOKEN_KEY); showLogin(); });
    window.addEventListener("hashchange", route);
    route();
  });
})();
