// The console's own script (no inline scripts: the pages' Content-Security-Policy allows 'self' only).
(function () {
  "use strict";

  // ---- the table page's snapshot timeline (uPlot) ----
  function timeline() {
    var holder = document.getElementById("snapshot-chart");
    var source = document.getElementById("timeline-data");
    if (!holder || !source) return;
    var d = JSON.parse(source.textContent);
    if (!d.t.length) { holder.textContent = "No snapshots yet."; return; }
    if (typeof uPlot === "undefined") { holder.textContent = "Chart library not installed (make console-assets)."; return; }
    var bytes = function (u, vals) {
      return vals.map(function (v) {
        var units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
        while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
        return (i ? v.toFixed(1) : v.toFixed(0)) + " " + units[i];
      });
    };
    var opts = {
      // times in UTC, as every page writes them (the server's `when` filter)
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
      width: Math.max(400, holder.clientWidth || 900),
      height: 280,
      series: [
        {},
        { label: "records", stroke: "#2563eb", width: 2, scale: "records" },
        { label: "files", stroke: "#16a34a", width: 2, scale: "files" },
        { label: "size", stroke: "#d97706", width: 2, scale: "size", value: function (u, v) { return v == null ? "" : bytes(u, [v])[0]; } }
      ],
      axes: [
        {},
        { scale: "records", label: "records", stroke: "#2563eb", size: 70 },
        { scale: "files", label: "files", side: 1, stroke: "#16a34a", grid: { show: false } },
        { scale: "size", label: "size", side: 1, stroke: "#d97706", grid: { show: false }, values: bytes, size: 80 }
      ]
    };
    new uPlot(opts, [d.t, d.records, d.files, d.size], holder);
  }

  // ---- the live view: an EventSource on the console's change-feed stream ----
  // A moment as the pages show it (the server's `when` filter): "YYYY-MM-DD HH:MM:SS UTC".
  function when(time) {
    var d = new Date(time);
    return isNaN(d.getTime()) ? "" : d.toISOString().slice(0, 19).replace("T", " ") + " UTC";
  }

  function cell(row, text, cls) {
    var td = document.createElement("td");
    td.textContent = text == null ? "" : String(text);
    if (cls) td.className = cls;
    row.appendChild(td);
  }

  function live() {
    var body = document.getElementById("live-events");
    var status = document.getElementById("live-status");
    if (!body || !window.EventSource) return;
    var es = new EventSource(body.getAttribute("data-source"));
    es.onopen = function () { status.textContent = "connected"; status.className = "ok"; };
    es.onerror = function () { status.textContent = "reconnecting…"; status.className = "warn"; };
    es.onmessage = function (m) {
      var e = JSON.parse(m.data), data = e.data || {};
      var tr = document.createElement("tr");
      tr.setAttribute("data-testid", "live-event");
      tr.setAttribute("data-type", e.type);
      tr.setAttribute("data-id", m.lastEventId);  // the feed position: resume and gap checks
      cell(tr, when(e.time), "time");
      cell(tr, e.type.replace(/^org\.paimon\./, ""));
      cell(tr, e.subject);
      cell(tr, data.snapshotId);
      cell(tr, data.principal);
      cell(tr, data.reason || data.commitKind || data.owner || data.operation || "", "reason");
      body.insertBefore(tr, body.firstChild);
      while (body.children.length > 500) body.removeChild(body.lastChild);
    };
  }

  timeline();
  live();
})();
