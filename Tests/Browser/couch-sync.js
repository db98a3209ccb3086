// A minimal CouchDB replication-protocol client in plain JavaScript, for the browser tests.
//
// The local store lives in memory: each document is a revision tree (rev -> {parent, body, deleted}), so local
// edits make proper revisions ("N-<32 hex>") with `_revisions` histories, and revisions pulled from the server
// keep theirs. Replication follows the CouchDB protocol:
//   pull: GET _local/<id> checkpoint -> GET _changes?style=all_docs&since=… -> POST _bulk_get?revs=true
//         -> PUT _local/<id> with the new checkpoint
//   push: GET _local/<id> checkpoint -> local changes since it -> POST _revs_diff -> POST _bulk_docs
//         {new_edits: false, docs with _revisions} -> PUT _local/<id>
// All requests use fetch with `credentials: 'include'` (the AuthSession cookie from a cross-origin POST /_session),
// or an Authorization header when `auth` is given.
(function (global) {
  'use strict';

  function randomHex(bytes) {
    const a = new Uint8Array(bytes);
    crypto.getRandomValues(a);
    return Array.from(a, (b) => b.toString(16).padStart(2, '0')).join('');
  }

  function revPos(rev) { return parseInt(rev.split('-')[0], 10); }
  function revHash(rev) { return rev.slice(rev.indexOf('-') + 1); }

  // CouchDB's winner: non-deleted leaves first, then the longest path, then the greatest rev string.
  function compareLeaves(a, b) {
    if (a.deleted !== b.deleted) return a.deleted ? -1 : 1;
    const pa = revPos(a.rev), pb = revPos(b.rev);
    if (pa !== pb) return pa - pb;
    return a.rev < b.rev ? -1 : a.rev > b.rev ? 1 : 0;
  }

  class LocalStore {
    constructor() {
      this.docs = new Map();   // id -> {revs: Map(rev -> {parent, body, deleted}), seq}
      this.seq = 0;            // local update sequence (what push reads "changes" from)
      this.checkpoints = new Map(); // replication id -> {session_id, last_seq}
    }

    tree(id) {
      let t = this.docs.get(id);
      if (!t) { t = { revs: new Map(), seq: 0 }; this.docs.set(id, t); }
      return t;
    }

    leaves(id) {
      const t = this.docs.get(id);
      if (!t) return [];
      const parents = new Set();
      for (const node of t.revs.values()) if (node.parent) parents.add(node.parent);
      const out = [];
      for (const [rev, node] of t.revs) if (!parents.has(rev)) out.push({ rev, deleted: !!node.deleted });
      return out;
    }

    winner(id) {
      const leaves = this.leaves(id);
      if (!leaves.length) return null;
      leaves.sort(compareLeaves);
      return leaves[leaves.length - 1];
    }

    // The winning revision as a document ({_id, _rev, ...body}), or null when missing or deleted.
    get(id) {
      const w = this.winner(id);
      if (!w || w.deleted) return null;
      const node = this.docs.get(id).revs.get(w.rev);
      return Object.assign({ _id: id, _rev: w.rev }, node.body);
    }

    allDocs() {
      return Array.from(this.docs.keys()).sort().map((id) => this.get(id)).filter((d) => d);
    }

    // `_revisions` for a revision: {start, ids} walking its ancestry.
    revisions(id, rev) {
      const t = this.docs.get(id);
      const ids = [];
      let r = rev;
      while (r) {
        ids.push(revHash(r));
        const node = t.revs.get(r);
        r = node ? node.parent : null;
      }
      return { start: revPos(rev), ids };
    }

    bump(id) { this.seq += 1; this.tree(id).seq = this.seq; }

    // A local edit: `doc._rev` must be the current winner (or absent for a new doc), like CouchDB's PUT.
    put(doc) {
      const id = doc._id || randomHex(16);
      const current = this.winner(id);
      const live = current && !current.deleted ? current.rev : null;
      if ((doc._rev || null) !== live) {
        const e = new Error('conflict: ' + id + ' is at ' + live + ', not ' + doc._rev);
        e.status = 409;
        throw e;
      }
      const parent = doc._rev || (current ? current.rev : null);
      const rev = (parent ? revPos(parent) + 1 : 1) + '-' + randomHex(16);
      const body = {};
      for (const k of Object.keys(doc)) if (!k.startsWith('_')) body[k] = doc[k];
      this.tree(id).revs.set(rev, { parent, body, deleted: !!doc._deleted });
      this.bump(id);
      return { ok: true, id, rev };
    }

    // A revision from elsewhere, with its `_revisions` history (from _bulk_get?revs=true). Returns whether it was new.
    insertReplicated(doc) {
      const id = doc._id;
      const t = this.tree(id);
      if (t.revs.has(doc._rev)) return false;
      const hist = doc._revisions || { start: revPos(doc._rev), ids: [revHash(doc._rev)] };
      const chain = hist.ids.map((h, i) => (hist.start - i) + '-' + h);
      for (let i = chain.length - 1; i >= 0; i--) {
        const rev = chain[i];
        const parent = i + 1 < chain.length ? chain[i + 1] : null;
        if (!t.revs.has(rev)) t.revs.set(rev, { parent, body: {}, deleted: false, stub: true });
      }
      const body = {};
      for (const k of Object.keys(doc)) if (!k.startsWith('_')) body[k] = doc[k];
      t.revs.set(doc._rev, { parent: chain[1] || null, body, deleted: !!doc._deleted });
      this.bump(id);
      return true;
    }

    // Local changes after `since`: [{id, seq, leaves: [rev]}], in sequence order.
    changesSince(since) {
      const out = [];
      for (const [id, t] of this.docs) if (t.seq > since) out.push({ id, seq: t.seq, leaves: this.leaves(id).map((l) => l.rev) });
      out.sort((a, b) => a.seq - b.seq);
      return out;
    }
  }

  class Replicator {
    // remoteDb: e.g. "http://127.0.0.1:5984/db"; options.auth: "user:password" for basic auth instead of cookies.
    constructor(store, remoteDb, options) {
      this.store = store;
      this.remoteDb = remoteDb.replace(/\/+$/, '');
      this.auth = options && options.auth;
      this.clientId = (options && options.clientId) || 'browser';
      this.log = (options && options.log) || (() => {});
      this.requests = [];  // "METHOD path" of every request, for tests
    }

    async request(method, path, body) {
      const headers = { Accept: 'application/json' };
      if (body !== undefined) headers['Content-Type'] = 'application/json';
      if (this.auth) headers.Authorization = 'Basic ' + btoa(this.auth);
      const url = this.remoteDb + path;
      this.requests.push(method + ' ' + path);
      const res = await fetch(url, {
        method, headers, credentials: 'include', mode: 'cors', cache: 'no-store',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      let json = null;
      try { json = text ? JSON.parse(text) : null; } catch (e) { json = { raw: text }; }
      return { status: res.status, json };
    }

    async expect(method, path, body, okStatuses) {
      const r = await this.request(method, path, body);
      if (!okStatuses.includes(r.status)) {
        const e = new Error(method + ' ' + path + ' -> ' + r.status + ' ' + JSON.stringify(r.json));
        e.status = r.status;
        throw e;
      }
      return r.json;
    }

    replicationId(direction) {
      // Stable per (client, remote, direction), like CouchDB's replication ids.
      let h = 0;
      const s = this.clientId + '|' + this.remoteDb + '|' + direction;
      for (let i = 0; i < s.length; i++) h = (Math.imul(31, h) + s.charCodeAt(i)) | 0;
      return 'browser-' + direction + '-' + (h >>> 0).toString(16);
    }

    // The checkpoint both sides agree on (remote _local doc and our own record), or 0.
    async readCheckpoint(repId) {
      const r = await this.request('GET', '/_local/' + repId);
      if (r.status === 404) return { since: 0, doc: null };
      if (r.status !== 200) throw new Error('GET _local/' + repId + ' -> ' + r.status + ' ' + JSON.stringify(r.json));
      const mine = this.store.checkpoints.get(repId);
      const agreed = mine && mine.session_id === r.json.session_id;
      return { since: agreed ? r.json.last_seq : 0, doc: r.json };
    }

    async writeCheckpoint(repId, previous, lastSeq) {
      const sessionId = randomHex(16);
      const doc = { _id: '_local/' + repId, session_id: sessionId, last_seq: lastSeq,
                    history: [{ session_id: sessionId, recorded_seq: lastSeq, end_time: new Date().toISOString() }] };
      if (previous && previous._rev) doc._rev = previous._rev;
      await this.expect('PUT', '/_local/' + repId, doc, [200, 201]);
      this.store.checkpoints.set(repId, { session_id: sessionId, last_seq: lastSeq });
    }

    // Server -> page.
    async pull() {
      const repId = this.replicationId('pull');
      const cp = await this.readCheckpoint(repId);
      const since = cp.since;
      const changes = await this.expect('GET', '/_changes?style=all_docs&since=' + encodeURIComponent(
        typeof since === 'string' ? since : JSON.stringify(since)), undefined, [200]);
      const wanted = [];
      for (const row of changes.results) {
        const t = this.store.docs.get(row.id);
        for (const c of row.changes) {
          const have = t && t.revs.has(c.rev);  // a stub means we hold a descendant already
          if (!have) wanted.push({ id: row.id, rev: c.rev });
        }
      }
      let written = 0;
      if (wanted.length) {
        const got = await this.expect('POST', '/_bulk_get?revs=true', { docs: wanted }, [200]);
        for (const result of got.results) {
          for (const d of result.docs) {
            if (d.ok) { if (this.store.insertReplicated(d.ok)) written += 1; }
            else throw new Error('_bulk_get ' + result.id + ': ' + JSON.stringify(d.error));
          }
        }
      }
      await this.writeCheckpoint(repId, cp.doc, changes.last_seq);
      const stats = { since, changes: changes.results.length, changed_ids: changes.results.map((r) => r.id),
                      docs_read: written, last_seq: changes.last_seq, checkpoint: '_local/' + repId };
      this.log('pull', stats);
      return stats;
    }

    // Page -> server.
    async push() {
      const repId = this.replicationId('push');
      const cp = await this.readCheckpoint(repId);
      const since = typeof cp.since === 'number' ? cp.since : 0;
      const changes = this.store.changesSince(since);
      const lastSeq = this.store.seq;
      let written = 0, missingCount = 0;
      if (changes.length) {
        const diffRequest = {};
        for (const c of changes) diffRequest[c.id] = c.leaves;
        const diff = await this.expect('POST', '/_revs_diff', diffRequest, [200]);
        const docs = [];
        for (const id of Object.keys(diff)) {
          for (const rev of diff[id].missing || []) {
            const node = this.store.docs.get(id).revs.get(rev);
            const doc = Object.assign({ _id: id, _rev: rev }, node.body);
            if (node.deleted) doc._deleted = true;
            doc._revisions = this.store.revisions(id, rev);
            docs.push(doc);
          }
        }
        missingCount = docs.length;
        if (docs.length) {
          const results = await this.expect('POST', '/_bulk_docs', { docs, new_edits: false }, [201, 202]);
          const failed = (results || []).filter((r) => r.error);
          if (failed.length) throw new Error('_bulk_docs: ' + JSON.stringify(failed));
          written = docs.length;
        }
      }
      await this.writeCheckpoint(repId, cp.doc, lastSeq);
      const stats = { since, changes: changes.length, missing: missingCount, docs_written: written, last_seq: lastSeq,
                      checkpoint: '_local/' + repId };
      this.log('push', stats);
      return stats;
    }
  }

  // POST /_session on the server (cross-origin): the AuthSession cookie comes back for later credentialed fetches.
  async function login(serverUrl, name, password) {
    const res = await fetch(serverUrl.replace(/\/+$/, '') + '/_session', {
      method: 'POST', credentials: 'include', mode: 'cors',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ name, password }),
    });
    const json = await res.json();
    if (!res.ok) throw new Error('login failed: ' + res.status + ' ' + JSON.stringify(json));
    return json;
  }

  global.CouchSync = { LocalStore, Replicator, login, randomHex };
})(window);
