import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import SetteeCore

/// The admin UI's stylesheet and script, compiled into the binary (no files to ship, no build step).
/// Served with a strong `ETag` and a year of caching: page links carry `?v=<hash>`, so a new build busts caches.
enum UIAssets {
    struct Asset: Sendable {
        let contentType: String
        let bytes: [UInt8]
        let etag: String
    }

    static let assets: [String: Asset] = {
        func asset(_ type: String, _ text: String) -> Asset {
            let bytes = Array(text.utf8)
            return Asset(contentType: type, bytes: bytes, etag: "\"" + Hex.encode(Array(Array(SHA256.hash(data: bytes)).prefix(12))) + "\"")
        }
        return ["app.css": asset("text/css; charset=utf-8", css), "app.js": asset("text/javascript; charset=utf-8", script),
                "favicon.svg": asset("image/svg+xml", favicon)]
    }()

    /// Changes whenever an asset does.
    static let version: String = {
        let joined = assets.keys.sorted().map { assets[$0]!.etag }.joined()
        return Hex.encode(Array(Array(SHA256.hash(data: Array(joined.utf8))).prefix(6)))
    }()

    static func response(named name: String, request: Request) throws -> Response {
        guard let asset = assets[name] else { throw CouchError.notFound("No such asset.") }
        var headers = HTTPFields()
        headers[.eTag] = asset.etag
        headers[.cacheControl] = "public, max-age=31536000, immutable"
        headers[.contentType] = asset.contentType
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        if let match = request.headers[.ifNoneMatch], match.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == asset.etag }) {
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: asset.bytes)))
    }

    static let favicon = #"""
    <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#1d2733"/><path d="M7 19h18v4H7zM9 12h14v6H9z" fill="#6fa0ea"/></svg>
    """#

    static let css = #"""
    :root { --fg: #1d232a; --muted: #66707a; --line: #dde2e7; --bg: #f6f7f9; --accent: #2458c6; --ok: #1f8a4c;
            --warn: #b86e00; --bad: #c0392b; --ghost: #9aa3ab; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; }
    * { box-sizing: border-box; } [hidden] { display: none !important; }
    body { margin: 0; color: var(--fg); background: var(--bg); font-size: 14px; line-height: 1.45; }
    a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
    header.top { display: flex; align-items: center; gap: 24px; padding: 10px 24px; background: #1d2733; color: #fff; }
    header.top a { color: #d7e3f4; } header.top .brand { font-weight: 700; font-size: 17px; color: #fff; letter-spacing: .5px; }
    nav.main { display: flex; gap: 16px; flex: 1; } nav.main a.active { color: #fff; font-weight: 600; }
    .who { display: flex; gap: 10px; align-items: center; color: #b7c3d0; }
    main { max-width: 1200px; margin: 0 auto; padding: 18px 24px 60px; }
    h1 { font-size: 22px; margin: 8px 0 14px; } h2 { font-size: 18px; margin: 22px 0 10px; } h3 { font-size: 15px; margin: 20px 0 8px; }
    table.list { width: 100%; border-collapse: collapse; background: #fff; border: 1px solid var(--line); margin: 8px 0; }
    table.list th, table.list td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
    table.list th { background: #eef1f4; font-weight: 600; font-size: 12px; text-transform: uppercase; letter-spacing: .3px; color: #4a545e; }
    .num { text-align: right !important; font-variant-numeric: tabular-nums; }
    table.list th.rev { text-transform: none; letter-spacing: 0; color: #5a4a8a; }
    table.kv { width: auto; min-width: 420px; } table.kv th { width: 160px; }
    .rev, code, pre, textarea { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12.5px; }
    .rev { color: #5a4a8a; } .muted { color: var(--muted); } .small { font-size: 12px; }
    .preview { color: #4a545e; font-family: ui-monospace, Menlo, monospace; font-size: 12px; max-width: 560px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
    textarea { width: 100%; padding: 10px; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
    input, select { padding: 6px 8px; border: 1px solid var(--line); border-radius: 6px; font: inherit; background: #fff; }
    button, .button { display: inline-block; padding: 6px 14px; border-radius: 6px; border: 1px solid var(--accent); background: var(--accent);
                      color: #fff; font: inherit; cursor: pointer; }
    button:hover, .button:hover { filter: brightness(1.08); text-decoration: none; }
    button.secondary, .button.secondary { background: #fff; color: var(--accent); }
    button.danger { background: #fff; border-color: var(--bad); color: var(--bad); }
    button.small { padding: 2px 8px; font-size: 12px; } button.link { background: none; border: none; color: #d7e3f4; padding: 0; }
    form.inline { display: inline; } .row { display: flex; gap: 10px; align-items: center; margin: 10px 0; flex-wrap: wrap; }
    .row.spread { justify-content: space-between; }
    form.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(240px, 1fr)); gap: 10px 16px; align-items: end;
                background: #fff; border: 1px solid var(--line); padding: 14px; border-radius: 8px; }
    form.grid label { display: flex; flex-direction: column; gap: 4px; font-size: 12px; color: #4a545e; }
    form.grid label.check { flex-direction: row; align-items: center; }
    #query-form label { display: block; margin: 8px 0; } #query-form input { width: 100%; }
    .flash { padding: 8px 12px; border-radius: 6px; margin: 8px 0; }
    .flash.notice { background: #e7f4ec; border: 1px solid #b9dfc7; } .flash.error { background: #fbeaea; border: 1px solid #efc1bd; color: #8b241a; }
    .flash.warn { background: #fff4e0; border: 1px solid #f1d39d; }
    .badge { display: inline-block; padding: 1px 7px; border-radius: 10px; font-size: 11px; background: #e8ecf0; color: #3c4650; }
    .badge.winner, .badge.completed, .badge.running, .badge.ready { background: #e0f2e7; color: var(--ok); }
    .badge.conflict, .badge.crashing, .badge.pending, .badge.triggered { background: #fff0d6; color: var(--warn); }
    .badge.deleted, .badge.tombstone { background: #eceef0; color: #6b747c; } .badge.failed, .badge.error { background: #fbe3e1; color: var(--bad); }
    .dbhead h1 a { color: var(--fg); } .dbstats { margin: -8px 0 10px; color: var(--muted); }
    nav.tabs { display: flex; gap: 4px; border-bottom: 1px solid var(--line); margin-bottom: 14px; }
    nav.tabs a { padding: 6px 14px; border: 1px solid transparent; border-bottom: none; border-radius: 6px 6px 0 0; color: #4a545e; }
    nav.tabs a.active { background: #fff; border-color: var(--line); color: var(--fg); font-weight: 600; margin-bottom: -1px; }
    .glance { display: flex; flex-wrap: wrap; gap: 10px; margin: 0 0 16px; }
    .card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; min-width: 140px; }
    .card .value { font-size: 20px; font-weight: 600; } .card .label { color: var(--muted); font-size: 12px; }
    .signin { max-width: 360px; margin: 80px auto; background: #fff; padding: 24px 28px; border: 1px solid var(--line); border-radius: 10px; }
    .signin label { display: flex; flex-direction: column; gap: 4px; margin: 12px 0; }
    pre.json, pre.plan { background: #fff; border: 1px solid var(--line); padding: 10px; border-radius: 6px; overflow: auto; max-height: 480px; margin: 0; }
    pre.json.small { max-height: 160px; font-size: 11.5px; padding: 6px; }
    .scroll { overflow-x: auto; }
    .treebox { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 8px; overflow-x: auto; }
    svg.revtree .edge { fill: none; stroke: #aab3bc; stroke-width: 2; }
    svg.revtree circle { fill: #fff; stroke: var(--ghost); stroke-width: 2.5; }
    svg.revtree .winner circle { fill: var(--ok); stroke: var(--ok); }
    svg.revtree .conflict circle { fill: #ffb54d; stroke: var(--warn); }
    svg.revtree .tombstone circle { fill: #eceef0; stroke: #6b747c; }
    svg.revtree .cross { stroke: #6b747c; stroke-width: 2; }
    svg.revtree text { font: 11px ui-monospace, Menlo, monospace; fill: #3c4650; }
    .legend .dot { display: inline-block; width: 10px; height: 10px; border-radius: 50%; border: 2px solid var(--ghost); vertical-align: middle; margin-left: 8px; }
    .legend .dot.winner { background: var(--ok); border-color: var(--ok); } .legend .dot.conflict { background: #ffb54d; border-color: var(--warn); }
    .legend .dot.tombstone { background: #eceef0; border-color: #6b747c; }
    tr.fresh { animation: fresh 2s ease-out; } @keyframes fresh { from { background: #fff6c9; } to { background: transparent; } }
    progress { width: 80px; vertical-align: middle; }
    .pager a { margin-left: 10px; }
    """#

    static let script = #"""
    // Settee admin UI: the few live parts of otherwise server-rendered pages. Same-origin calls to the CouchDB API
    // carry the session cookie (or the browser's basic-auth credentials).
    (function () {
      "use strict";
      function $(sel, root) { return (root || document).querySelector(sel); }
      function text(v) { return v === null || v === undefined ? "" : (typeof v === "string" ? v : JSON.stringify(v)); }
      function cell(tr, value, cls) { var td = document.createElement("td"); td.textContent = text(value); if (cls) td.className = cls; tr.appendChild(td); return td; }

      // Confirmation for destructive forms.
      document.addEventListener("submit", function (e) {
        var msg = e.target.getAttribute && e.target.getAttribute("data-confirm");
        if (msg && !window.confirm(msg)) e.preventDefault();
      }, true);

      // Index form: show only the fields of the chosen kind.
      var kind = $("#index-type");
      if (kind) {
        var sync = function () {
          document.querySelectorAll("#index-form [data-kinds]").forEach(function (el) {
            el.hidden = el.getAttribute("data-kinds").split(" ").indexOf(kind.value) < 0;
          });
        };
        kind.addEventListener("change", sync); sync();
      }

      // Attachment upload: PUT the file as a standalone attachment, then reload the page.
      var upload = $("#attachment-upload");
      if (upload) {
        upload.addEventListener("submit", function (e) {
          e.preventDefault();
          var file = $("#attachment-file").files[0];
          if (!file) return;
          var status = $("#upload-status");
          status.textContent = "uploading…";
          fetch(upload.dataset.base + "/" + encodeURIComponent(file.name) + "?rev=" + encodeURIComponent(upload.dataset.rev), {
            method: "PUT", credentials: "same-origin", headers: { "Content-Type": file.type || "application/octet-stream" }, body: file
          }).then(function (r) { return r.json().then(function (j) { return [r, j]; }); }).then(function (rj) {
            if (rj[0].ok) { window.location.search = "?notice=" + encodeURIComponent("Uploaded " + file.name + " (" + rj[1].rev + ")"); }
            else { status.textContent = rj[0].status + " " + (rj[1].error || "") + ": " + (rj[1].reason || ""); }
          }).catch(function (err) { status.textContent = String(err); });
        });
      }

      // The change feed, live (EventSource over `_changes?feed=eventsource`).
      var changes = $("#changes");
      if (changes && window.EventSource) {
        var state = $("#feed-state");
        var source = new EventSource(changes.dataset.feed, { withCredentials: true });
        source.onopen = function () { state.textContent = "live"; };
        source.onerror = function () { state.textContent = "reconnecting…"; };
        source.onmessage = function (event) {
          var change; try { change = JSON.parse(event.data); } catch (err) { return; }
          if (!change.id) return;
          var tr = document.createElement("tr"); tr.className = "fresh live-change";
          cell(tr, change.seq, "seq");
          var td = document.createElement("td"), a = document.createElement("a");
          a.href = changes.dataset.docBase + encodeURIComponent(change.id); a.textContent = change.id; td.appendChild(a); tr.appendChild(td);
          cell(tr, (change.changes || []).map(function (c) { return c.rev; }).join(", "), "rev");
          var last = cell(tr, "");
          if (change.deleted) { var b = document.createElement("span"); b.className = "badge tombstone"; b.textContent = "deleted"; last.appendChild(b); }
          var body = changes.tBodies[0]; body.insertBefore(tr, body.firstChild);
          while (body.rows.length > 500) body.deleteRow(body.rows.length - 1);
        };
      }

      // Replication: `_replicator` job states and `_active_tasks`, refreshed every second.
      function poll(table, render) {
        var busy = false;
        var tick = function () {
          if (busy || document.hidden) return;
          busy = true;
          fetch(table.dataset.poll, { credentials: "same-origin", headers: { Accept: "application/json" } })
            .then(function (r) { return r.ok ? r.json() : null; })
            .then(function (j) { if (j) render(table.tBodies[0], j); })
            .catch(function () {}).then(function () { busy = false; });
        };
        setInterval(tick, 1000);
      }
      function emptyRow(body, cols, message) {
        var tr = document.createElement("tr"); tr.className = "empty"; var td = cell(tr, message, "muted"); td.colSpan = cols; body.appendChild(tr);
      }
      var jobs = $("#replication-jobs");
      if (jobs) {
        poll(jobs, function (body, j) {
          var keep = {};
          Array.prototype.forEach.call(body.rows, function (tr) { if (tr.dataset.doc) keep[tr.dataset.doc] = tr; });
          (j.docs || []).forEach(function (d) {
            var tr = keep[d.doc_id];
            if (!tr) return;  // started elsewhere: it appears on the next page load (no reload under a half-typed form)
            var stateCell = tr.querySelector(".state");
            stateCell.innerHTML = "";
            var badge = document.createElement("span"); badge.className = "badge " + d.state; badge.textContent = d.state; stateCell.appendChild(badge);
            if (d.info && d.info.error) { var s = document.createElement("span"); s.className = "small"; s.textContent = " " + d.info.error; stateCell.appendChild(s); }
            tr.cells[4].textContent = text(d.info && d.info.docs_written);
            tr.cells[5].textContent = text(d.last_updated);
          });
        });
      }
      var tasks = $("#active-tasks");
      if (tasks) {
        poll(tasks, function (body, list) {
          body.innerHTML = "";
          var reps = list.filter(function (t) { return t.type === "replication"; });
          reps.forEach(function (t) {
            var tr = document.createElement("tr");
            cell(tr, t.replication_id, "small"); cell(tr, t.source); cell(tr, t.target); cell(tr, t.state);
            cell(tr, t.docs_read, "num"); cell(tr, t.docs_written, "num"); cell(tr, t.changes_pending, "num"); cell(tr, t.checkpointed_source_seq);
            body.appendChild(tr);
          });
          if (!reps.length) emptyRow(body, 8, "No running replications.");
        });
      }

      // Indexes: build state and how far each index has read the change feed.
      var indexes = $("#indexes");
      if (indexes && indexes.dataset.db) {
        var db = encodeURIComponent(indexes.dataset.db);
        setInterval(function () {
          if (document.hidden) return;
          Promise.all([
            fetch("/" + db, { credentials: "same-origin" }).then(function (r) { return r.json(); }),
            fetch("/" + db + "/_indexes", { credentials: "same-origin" }).then(function (r) { return r.json(); })
          ]).then(function (res) {
            var seq = parseInt(String(res[0].update_seq || 0), 10) || 0;
            (res[1].indexes || []).forEach(function (ix) {
              var tr = indexes.querySelector('tr[data-index="' + CSS.escape(ix.name) + '"]');
              if (!tr) return;
              tr.querySelector(".index-state").textContent = ix.state;
              tr.querySelector("progress").value = seq ? Math.min(100, 100 * ix.last_seq / seq) : 100;
              tr.querySelector(".seq").textContent = "seq " + ix.last_seq;
            });
          }).catch(function () {});
        }, 2000);
      }
    })();
    """#
}
