import Mustache

/// The admin UI's Mustache templates. Every page extends `layout` (`{{<layout}}…{{/layout}}`) and fills its
/// `content` block; `{{…}}` escapes HTML, `{{{…}}}` is used only for markup the server built itself (the SVG tree).
/// They render a ``UIPageContext``: the variables are the properties of the page's model (`UIPageModels.swift`).
enum UITemplates {
    static let library: MustacheLibrary = {
        var library = MustacheLibrary()
        for (name, text) in templates {
            do { try library.register(text, named: name) } catch { fatalError("UI template \(name) does not parse: \(error)") }
        }
        return library
    }()

    static let templates: [String: String] = [
        "layout": layout, "csrf": csrf, "dbnav": dbnav, "login": login, "dashboard": dashboard, "documents": documents,
        "document": document, "tree": tree, "query": query, "views": views, "indexes": indexes, "changes": changes,
        "replication": replication, "metrics": metrics, "error": error, "security": security, "account": account,
    ]

    static let csrf = #"<input type="hidden" name="_csrf" value="{{csrf}}">"#

    static let layout = #"""
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>{{title}} · Settee</title>
    <link rel="icon" href="/_utils/assets/favicon.svg?v={{asset}}" type="image/svg+xml">
    <link rel="stylesheet" href="/_utils/assets/app.css?v={{asset}}">
    <script src="/_utils/assets/app.js?v={{asset}}" defer></script>
    </head>
    <body>
    {{#chrome}}
    <header class="top">
      <a class="brand" href="/_utils/">Settee</a>
      <nav class="main">
        <a href="/_utils/" {{#nav_databases}}class="active"{{/nav_databases}}>Databases</a>
        <a href="/_utils/replication" {{#nav_replication}}class="active"{{/nav_replication}}>Replication</a>
        <a href="/_utils/metrics" {{#nav_metrics}}class="active"{{/nav_metrics}}>Metrics</a>
      </nav>
      <div class="who">
        <a href="/_utils/account" id="signed-in-as">{{user}}</a>
        {{#canSignOut}}<form method="post" action="/_utils/logout" class="inline">{{>csrf}}<button type="submit" id="sign-out" class="link">Sign out</button></form>{{/canSignOut}}
      </div>
    </header>
    {{/chrome}}
    <main>
    {{#notice}}<p class="flash notice" id="notice" role="status">{{notice}}</p>{{/notice}}
    {{#error}}<p class="flash error" id="error" role="alert">{{error}}</p>{{/error}}
    {{$content}}{{/content}}
    </main>
    </body>
    </html>
    """#

    static let dbnav = #"""
    <div class="dbhead">
      <h1><a href="/_utils/">Databases</a> / <a href="{{dbHref}}" id="db-name">{{db}}</a></h1>
      <p class="dbstats"><span id="db-doc-count">{{dbDocs}}</span> documents · {{dbDeleted}} deleted · {{dbSize}} · update seq {{dbSeq}}</p>
      <nav class="tabs">
        <a href="{{dbHref}}" {{#nav_documents}}class="active"{{/nav_documents}}>Documents</a>
        <a href="{{dbHref}}/query" {{#nav_query}}class="active"{{/nav_query}}>Query</a>
        <a href="{{dbHref}}/views" {{#nav_views}}class="active"{{/nav_views}}>Views</a>
        <a href="{{dbHref}}/indexes" {{#nav_indexes}}class="active"{{/nav_indexes}}>Indexes</a>
        <a href="{{dbHref}}/changes" {{#nav_changes}}class="active"{{/nav_changes}}>Changes</a>
        <a href="{{dbHref}}/security" {{#nav_security}}class="active"{{/nav_security}}>Permissions</a>
      </nav>
    </div>
    """#

    static let login = #"""
    {{<layout}}{{$content}}
    <section class="signin">
      <h1>Settee</h1>
      <p>Sign in with a server admin account or a user from <code>_users</code>.</p>
      <form method="post" action="/_utils/login?next={{nextEncoded}}" id="login-form">
        <label>Name <input name="name" id="login-name" autocomplete="username" value="{{name}}" required autofocus></label>
        <label>Password <input name="password" id="login-password" type="password" autocomplete="current-password" required></label>
        <button type="submit" id="login-submit">Sign in</button>
      </form>
    </section>
    {{/content}}{{/layout}}
    """#

    static let dashboard = #"""
    {{<layout}}{{$content}}
    <h1>Databases <span class="muted">({{count}})</span></h1>
    {{#hasGlance}}
    <section class="glance" id="glance">
      {{#glance}}<div class="card"><div class="value">{{value}}</div><div class="label">{{label}}</div></div>{{/glance}}
    </section>
    {{/hasGlance}}
    <form method="post" action="/_utils/databases" class="row" id="create-db-form">
      {{>csrf}}
      <input name="name" id="new-db-name" placeholder="new database name" pattern="[a-z][a-z0-9_$()+/-]*" title="lowercase letters, digits and _$()+-/, starting with a letter" required>
      <button type="submit" id="create-db">Create database</button>
    </form>
    <form method="get" action="/_utils/" class="row" id="open-db-form">
      <input name="open" id="open-db-name" placeholder="open a database by name" required>
      <button type="submit" class="secondary">Open</button>
    </form>
    <table class="list" id="databases">
      <thead><tr><th>Name</th><th class="num">Documents</th><th class="num">Deleted</th><th class="num">Size</th><th>Update seq</th><th></th></tr></thead>
      <tbody>
      {{#databases}}
        <tr data-db="{{name}}">
          <td><a href="{{href}}" class="db-link">{{name}}</a>{{#dbError}} <span class="badge error">{{dbError}}</span>{{/dbError}}</td>
          <td class="num doc-count">{{docs}}</td><td class="num">{{deleted}}</td><td class="num">{{size}}</td><td class="seq">{{seq}}</td>
          <td><form method="post" action="{{href}}/delete" class="inline" data-confirm="Delete database {{name}} and all its documents?">{{>csrf}}<button type="submit" class="danger small delete-db">Delete</button></form></td>
        </tr>
      {{/databases}}
      {{^databases}}<tr><td colspan="6" class="muted">No databases yet.</td></tr>{{/databases}}
      </tbody>
    </table>
    <p class="muted small">Settee {{version}} · node {{uuid}}</p>
    {{/content}}{{/layout}}
    """#

    static let documents = #"""
    {{<layout}}{{$content}}
    {{>dbnav}}
    <div class="row spread">
      <a class="button" href="{{dbHref}}/new" id="new-doc">New document</a>
      <form method="get" action="{{dbHref}}" class="inline" id="jump-form"><input name="startkey" id="jump-id" placeholder="jump to id…" value="{{startkey}}"> <button type="submit" class="secondary">Go</button></form>
      <span>
      <form method="post" action="{{dbHref}}/compact" class="inline">{{>csrf}}<button type="submit" class="secondary" id="compact-db">Compact</button></form>
      <form method="post" action="{{dbHref}}/delete" class="inline" data-confirm="Delete database {{db}} and all its documents?">{{>csrf}}<button type="submit" class="danger" id="delete-db">Delete database</button></form>
      </span>
    </div>
    <table class="list" id="documents">
      <thead><tr><th>ID</th><th>Revision</th><th>Content</th><th></th></tr></thead>
      <tbody>
      {{#rows}}
        <tr data-id="{{id}}">
          <td><a href="{{href}}" class="doc-link">{{id}}</a></td>
          <td class="rev">{{rev}}</td>
          <td class="preview">{{preview}}</td>
          <td><a href="{{treeHref}}" class="tree-link">tree</a>{{#conflictBadge}} <span class="badge conflict">{{conflictBadge}} conflict(s)</span>{{/conflictBadge}}</td>
        </tr>
      {{/rows}}
      {{^rows}}<tr><td colspan="4" class="muted">No documents.</td></tr>{{/rows}}
      </tbody>
    </table>
    <p class="pager">{{from}}–{{to}} of {{total}}
      {{#prevHref}}<a href="{{prevHref}}" id="prev-page">← previous</a>{{/prevHref}}
      {{#nextHref}}<a href="{{nextHref}}" id="next-page">next →</a>{{/nextHref}}</p>
    {{/content}}{{/layout}}
    """#

    static let document = #"""
    {{<layout}}{{$content}}
    {{>dbnav}}
    <h2 id="doc-title">{{#isNew}}New document{{/isNew}}{{^isNew}}{{id}}{{/isNew}}
      {{#rev}}<span class="rev" id="doc-rev">{{rev}}</span>{{/rev}}
      {{#deleted}}<span class="badge tombstone">deleted</span>{{/deleted}}</h2>
    {{#missing}}<p class="flash error">{{missing}}</p>{{/missing}}
    {{#viewingRev}}<p class="flash notice">Viewing revision {{viewingRev}}. Saving writes a child of this revision (a conflict if it is not a leaf).</p>{{/viewingRev}}
    {{#hasDocConflicts}}
    <p class="flash warn" id="conflicts">This document has conflicts:
      {{#conflicts}}<a href="{{href}}" class="rev">{{rev}}</a> {{/conflicts}}
      — <a href="{{treeHref}}" id="resolve-link">see the tree and resolve</a></p>
    {{/hasDocConflicts}}
    {{#deletedConflicts}}<p class="muted small">Deleted conflicts: {{deletedConflicts}}</p>{{/deletedConflicts}}
    <form method="post" action="{{dbHref}}/save" id="doc-form">
      {{>csrf}}
      {{^isNew}}<input type="hidden" name="id" value="{{id}}">{{/isNew}}
      <textarea name="doc" id="doc-json" spellcheck="false" rows="20">{{json}}</textarea>
      <div class="row">
        <button type="submit" id="save-doc">Save</button>
        {{^isNew}}{{^isLocal}}<a href="{{treeHref}}" class="button secondary" id="tree-link">Revision tree</a>{{/isLocal}}{{/isNew}}
      </div>
    </form>
    {{^isNew}}{{#rev}}{{^deleted}}
    <form method="post" action="{{docHref}}/delete" class="inline" data-confirm="Delete this document (writes a tombstone revision)?">
      {{>csrf}}<input type="hidden" name="rev" value="{{rev}}"><button type="submit" class="danger" id="delete-doc">Delete document</button>
    </form>
    <section class="attachments">
      <h3>Attachments</h3>
      <table class="list" id="attachments">
        <thead><tr><th>Name</th><th>Type</th><th class="num">Length</th><th>Digest</th><th></th></tr></thead>
        <tbody>
        {{#attachments}}
          <tr><td><a href="{{href}}" class="attachment-link">{{name}}</a></td><td>{{type}}</td><td class="num">{{length}}</td><td class="rev">{{digest}}</td>
            <td><form method="post" action="{{docHref}}/delete-attachment" class="inline" data-confirm="Delete attachment {{name}}?">{{>csrf}}<input type="hidden" name="rev" value="{{rev}}"><input type="hidden" name="name" value="{{name}}"><button type="submit" class="danger small">Delete</button></form></td></tr>
        {{/attachments}}
        {{^attachments}}<tr><td colspan="5" class="muted">None.</td></tr>{{/attachments}}
        </tbody>
      </table>
      <form id="attachment-upload" class="row" data-base="{{attachmentBase}}" data-rev="{{rev}}">
        <input type="file" id="attachment-file" required>
        <button type="submit">Upload attachment</button>
        <span id="upload-status" class="muted"></span>
      </form>
    </section>
    {{/deleted}}{{/rev}}{{/isNew}}
    {{/content}}{{/layout}}
    """#

    static let tree = #"""
    {{<layout}}{{$content}}
    {{>dbnav}}
    <h2>Revision tree of <a href="{{docHref}}" id="tree-doc">{{id}}</a></h2>
    <p class="legend"><span class="dot winner"></span> winner <span class="dot conflict"></span> conflict
      <span class="dot tombstone"></span> deleted leaf <span class="dot ancestor"></span> ancestor
      · {{revisionCount}} revisions known · winner <span class="rev" id="winner-rev">{{winner}}</span></p>
    <div class="treebox">{{{svg}}}</div>
    {{#hasConflicts}}
    <p class="flash warn" id="conflict-summary">{{conflictCount}} conflicting revision(s). Keep one leaf (the others get tombstones), or edit a merged body below.</p>
    {{/hasConflicts}}
    {{^hasConflicts}}<p class="flash notice" id="no-conflicts">No conflicts.</p>{{/hasConflicts}}
    {{#hasDiffs}}
    <h3>Differences</h3>
    <table class="list" id="diffs">
      <thead><tr><th>Member</th>{{#diffRevs}}<th class="rev">{{rev}}</th>{{/diffRevs}}</tr></thead>
      <tbody>{{#diffs}}<tr><td><code>{{key}}</code></td>{{#values}}<td>{{value}}</td>{{/values}}</tr>{{/diffs}}</tbody>
    </table>
    {{/hasDiffs}}
    <table class="list" id="leaves">
      <thead><tr><th>Leaf</th><th>State</th><th>Body</th><th></th></tr></thead>
      <tbody>
      {{#leaves}}
        <tr data-rev="{{rev}}" data-state="{{state}}">
          <td><a href="{{href}}" class="rev">{{rev}}</a></td>
          <td><span class="badge {{state}}">{{state}}</span></td>
          <td><pre class="json small">{{json}}</pre></td>
          <td>{{#canKeep}}<form method="post" action="{{resolveHref}}" class="inline resolve-form" data-confirm="Keep {{rev}} and delete the other conflicting revisions?">{{>csrf}}<input type="hidden" name="keep" value="{{rev}}"><button type="submit" class="keep">Keep this one</button></form>{{/canKeep}}</td>
        </tr>
      {{/leaves}}
      </tbody>
    </table>
    {{#hasConflicts}}
    <section>
      <h3>Merge</h3>
      <p class="muted">Edit the winner's body into the version you want: it is saved on top of the winner, and the other leaves are deleted.</p>
      <form method="post" action="{{resolveHref}}" id="merge-form">
        {{>csrf}}<input type="hidden" name="keep" value="{{winner}}">
        <textarea name="body" id="merge-json" rows="12" spellcheck="false">{{mergeJSON}}</textarea>
        <button type="submit" id="merge-submit">Save merged version</button>
      </form>
    </section>
    {{/hasConflicts}}
    {{/content}}{{/layout}}
    """#

    static let query = #"""
    {{<layout}}{{$content}}
    {{>dbnav}}
    <form method="get" action="{{dbHref}}/query" id="query-form">
      <label>SQL++ <textarea name="q" id="query-text" rows="5" spellcheck="false">{{q}}</textarea></label>
      <label>Parameters (JSON object) <input name="params" id="query-params" value="{{params}}" placeholder='{"city": "Paris"}'></label>
      <button type="submit" id="run-query">Run</button>
    </form>
    {{#ran}}
    <p class="muted" id="query-summary"><span id="row-count">{{rowCount}}</span> rows in {{elapsed}} ms{{#truncated}} (first 1000 shown){{/truncated}}</p>
    <div class="scroll">
    <table class="list" id="results">
      <thead><tr>{{#columns}}<th>{{name}}</th>{{/columns}}</tr></thead>
      <tbody>{{#rows}}<tr>{{#cells}}<td>{{value}}</td>{{/cells}}</tr>{{/rows}}</tbody>
    </table>
    </div>
    <details><summary>JSON</summary><pre class="json" id="results-json">{{json}}</pre></details>
    {{/ran}}
    {{#plan}}<h3>Plan</h3><pre class="plan" id="plan">{{plan}}</pre>{{/plan}}
    <h3>Mango</h3>
    <form method="get" action="{{dbHref}}/query" id="mango-form">
      <label>Mango query (the body of <code>POST _find</code>) <textarea name="mango" id="mango-text" rows="4" spellcheck="false">{{mango}}</textarea></label>
      <button type="submit" id="run-mango">Find</button>
    </form>
    {{#mangoError}}<p class="flash error" id="mango-error" role="alert">{{mangoError}}</p>{{/mangoError}}
    {{#mangoRan}}
    <p class="muted" id="mango-summary"><span id="mango-count">{{mangoCount}}</span> documents in {{mangoElapsed}} ms, index <span id="mango-index">{{mangoIndex}}</span>{{#mangoBookmark}}, bookmark <code id="mango-bookmark">{{mangoBookmark}}</code>{{/mangoBookmark}}</p>
    {{#mangoWarning}}<p class="muted" id="mango-warning">{{mangoWarning}}</p>{{/mangoWarning}}
    <div class="scroll">
    <table class="list" id="mango-results">
      <thead><tr><th>_id</th><th>document</th></tr></thead>
      <tbody>{{#mangoDocs}}<tr><td>{{#docHref}}<a href="{{docHref}}">{{id}}</a>{{/docHref}}</td><td>{{doc}}</td></tr>{{/mangoDocs}}</tbody>
    </table>
    </div>
    <details><summary>JSON</summary><pre class="json" id="mango-json">{{mangoJSON}}</pre></details>
    {{/mangoRan}}
    {{/content}}{{/layout}}
    """#

    static let views = #"""
    {{<layout}}{{$content}}
    {{>dbnav}}
    {{^hasViews}}<p class="muted" id="no-views">No design document of this database has views. A view is a design document's
    <code>views</code> member: JavaScript <code>map</code> and <code>reduce</code> functions (CouchDB's), or a SQL++ declarative
    <code>map</code>; create one as a document with an id starting with <code>_design/</code>.</p>{{/hasViews}}
    {{#hasViews}}
    <table class="list" id="views">
      <thead><tr><th>View</th><th>Language</th><th>Map</th><th>Reduce</th></tr></thead>
      <tbody>{{#views}}<tr data-view="{{value}}"><td><a href="{{href}}">{{value}}</a></td><td>{{language}}</td><td><pre class="json">{{map}}</pre></td><td>{{reduce}}</td></tr>{{/views}}</tbody>
    </table>
    <form method="get" action="{{dbHref}}/views" id="view-form">
      <label>View <select name="view" id="view-name">{{#views}}<option value="{{value}}" {{#selected}}selected{{/selected}}>{{value}}</option>{{/views}}</select></label>
      <label>key (JSON) <input name="key" id="view-key" value="{{p_key}}" placeholder='"Paris"'></label>
      <label>startkey (JSON) <input name="startkey" id="view-startkey" value="{{p_startkey}}" placeholder='["Paris"]'></label>
      <label>endkey (JSON) <input name="endkey" id="view-endkey" value="{{p_endkey}}" placeholder='["Paris", {}]'></label>
      <label>partition <input name="partition" id="view-partition" value="{{p_partition}}" placeholder="(partitioned databases)"></label>
      <label>limit <input name="limit" id="view-limit" type="number" min="0" value="{{p_limit}}"></label>
      <label>skip <input name="skip" type="number" min="0" value="{{p_skip}}"></label>
      <label>group_level <input name="group_level" id="view-group-level" type="number" min="0" value="{{p_group_level}}"></label>
      <label>reduce <select name="reduce" id="view-reduce"><option value="" {{#reduce_default}}selected{{/reduce_default}}>as the view has it</option><option value="true" {{#reduce_true}}selected{{/reduce_true}}>true</option><option value="false" {{#reduce_false}}selected{{/reduce_false}}>false</option></select></label>
      <label class="check"><input type="checkbox" name="include_docs" id="view-include-docs" value="true" {{#includeDocs}}checked{{/includeDocs}}> include_docs</label>
      <label class="check"><input type="checkbox" name="descending" value="true" {{#descending}}checked{{/descending}}> descending</label>
      <button type="submit" id="run-view">Run</button>
    </form>
    {{/hasViews}}
    {{#ran}}
    <p class="muted" id="view-summary"><span id="row-count">{{rowCount}}</span> rows of {{viewName}}{{#totalRows}} (total_rows {{totalRows}}, offset {{offset}}){{/totalRows}} in {{elapsed}} ms{{#truncated}} (first 1000 shown){{/truncated}}</p>
    <div class="scroll">
    <table class="list" id="view-rows">
      <thead><tr><th>key</th><th>value</th><th>id</th>{{#showDocs}}<th>doc</th>{{/showDocs}}</tr></thead>
      <tbody>{{#rows}}<tr><td>{{key}}</td><td>{{value}}</td><td>{{#id}}<a href="{{docHref}}">{{id}}</a>{{/id}}</td>{{#showDocs}}<td>{{doc}}</td>{{/showDocs}}</tr>{{/rows}}</tbody>
    </table>
    </div>
    <details><summary>JSON</summary><pre class="json" id="view-json">{{json}}</pre></details>
    {{/ran}}
    {{/content}}{{/layout}}
    """#

    static let indexes = #"""
    {{<layout}}{{$content}}
    {{>dbnav}}
    <p class="muted" id="mango-indexes-note">Settee's SQL++ indexes (<code>/{db}/_indexes</code>). CouchDB's Mango json indexes are
    design documents with <code>"language": "query"</code>: they are listed by <code>GET /{{db}}/_index</code> and used by the
    Mango box of the <a href="{{dbHref}}/query">Query</a> page.</p>
    <table class="list" id="indexes" data-db="{{db}}" data-update-seq="{{updateSeq}}">
      <thead><tr><th>Name</th><th>Collection</th><th>Type</th><th>Expressions</th><th>Options</th><th>State</th><th></th></tr></thead>
      <tbody>
      {{#indexes}}
        <tr data-index="{{name}}">
          <td class="index-name">{{name}}</td><td>{{collection}}</td><td>{{type}}</td><td><code>{{expressions}}</code></td><td class="small">{{options}}</td>
          <td class="state"><span class="index-state">{{state}}</span> <progress max="100" value="{{percent}}"></progress> <span class="small muted seq">seq {{lastSeq}}</span></td>
          <td><form method="post" action="{{dbHref}}/indexes/delete" class="inline" data-confirm="Drop index {{name}}?">{{>csrf}}<input type="hidden" name="name" value="{{name}}"><input type="hidden" name="collection" value="{{collection}}"><button type="submit" class="danger small">Drop</button></form></td>
        </tr>
      {{/indexes}}
      {{^indexes}}<tr><td colspan="7" class="muted">No indexes.</td></tr>{{/indexes}}
      </tbody>
    </table>
    <h3>Create an index</h3>
    <form method="post" action="{{dbHref}}/indexes" id="index-form" class="grid">
      {{>csrf}}
      {{#form}}
      <label>Name <input name="name" id="index-name" value="{{name}}" required></label>
      <label>Type <select name="type" id="index-type">
        <option value="value">value</option><option value="fulltext">full-text</option>
        <option value="array">array</option><option value="vector">vector</option></select></label>
      <label>Expressions <input name="expressions" id="index-expressions" value="{{expressions}}" placeholder="type, city"></label>
      <label data-kinds="value fulltext">Where (partial index) <input name="where" value="{{where}}" placeholder="type = 'hotel'"></label>
      <label data-kinds="array">Array path <input name="path" value="{{path}}" placeholder="contacts[].phones"></label>
      <label data-kinds="fulltext">Language <input name="language" value="{{language}}" placeholder="en"></label>
      <label data-kinds="fulltext" class="check"><input type="checkbox" name="ignoreAccents"> ignore accents</label>
      <label data-kinds="vector">Dimensions <input name="dimensions" value="{{dimensions}}" inputmode="numeric"></label>
      <label data-kinds="vector">Centroids <input name="centroids" value="{{centroids}}" inputmode="numeric"></label>
      <label data-kinds="vector">Metric <select name="metric"><option>euclideanSquared</option><option>euclidean</option><option>cosine</option><option>dot</option></select></label>
      <label data-kinds="vector">Encoding <select name="encoding"><option>SQ8</option><option>SQ6</option><option>SQ4</option><option>none</option><option>PQ</option></select></label>
      <label data-kinds="vector">Probes <input name="numProbes" value="{{numProbes}}" inputmode="numeric"></label>
      <label data-kinds="vector" class="check"><input type="checkbox" name="lazy"> lazy (vectors supplied by an updater)</label>
      <label>Collection <input name="collection" value="{{collection}}" placeholder="_default._default"></label>
      {{/form}}
      <button type="submit" id="create-index">Create index</button>
    </form>
    {{/content}}{{/layout}}
    """#

    static let changes = #"""
    {{<layout}}{{$content}}
    {{>dbnav}}
    <p class="muted">Newest first. New changes appear as they are committed (<span id="feed-state">connecting…</span>).</p>
    <table class="list" id="changes" data-feed="{{feedURL}}" data-doc-base="{{dbHref}}/doc/">
      <thead><tr><th>Seq</th><th>ID</th><th>Revisions</th><th></th></tr></thead>
      <tbody>
      {{#changes}}
        <tr><td class="seq">{{seq}}</td><td><a href="{{href}}">{{id}}</a></td><td class="rev">{{revs}}</td><td>{{#deleted}}<span class="badge tombstone">deleted</span>{{/deleted}}</td></tr>
      {{/changes}}
      </tbody>
    </table>
    {{/content}}{{/layout}}
    """#

    static let replication = #"""
    {{<layout}}{{$content}}
    <h1>Replication</h1>
    <form method="post" action="/_utils/replication" id="replication-form" class="grid">
      {{>csrf}}
      <label>Source <input name="source" id="rep-source" list="dbnames" placeholder="database or http://user:pass@host:5984/db" required></label>
      <label>Target <input name="target" id="rep-target" list="dbnames" placeholder="database or URL" required></label>
      <label>Job id <input name="id" id="rep-id" placeholder="(generated)"></label>
      <label class="check"><input type="checkbox" name="continuous" id="rep-continuous"> continuous</label>
      <label class="check"><input type="checkbox" name="create_target" id="rep-create-target"> create target</label>
      <datalist id="dbnames">{{#databases}}<option value="{{name}}">{{/databases}}</datalist>
      <button type="submit" id="start-replication">Start replication</button>
    </form>
    <h2><code>_replicator</code> jobs</h2>
    <table class="list" id="replication-jobs" data-poll="/_scheduler/docs">
      <thead><tr><th>Document</th><th>Source</th><th>Target</th><th>State</th><th class="num">Written</th><th>Updated</th><th></th></tr></thead>
      <tbody>
      {{#jobs}}
        <tr data-doc="{{docId}}"><td>{{docId}}</td><td>{{source}}</td><td>{{target}}</td><td class="state"><span class="badge {{state}}">{{state}}</span> <span class="small">{{error}}</span></td><td class="num">{{written}}</td><td class="small">{{updated}}</td>
          <td><form method="post" action="/_utils/replication/delete" class="inline" data-confirm="Stop and remove replication {{docId}}?">{{>csrf}}<input type="hidden" name="id" value="{{docId}}"><button type="submit" class="danger small">Remove</button></form></td></tr>
      {{/jobs}}
      {{^jobs}}<tr class="empty"><td colspan="7" class="muted">No <code>_replicator</code> jobs.</td></tr>{{/jobs}}
      </tbody>
    </table>
    <h2>Active tasks</h2>
    <table class="list" id="active-tasks" data-poll="/_active_tasks">
      <thead><tr><th>Job</th><th>Source</th><th>Target</th><th>State</th><th class="num">Read</th><th class="num">Written</th><th class="num">Pending</th><th>Checkpoint</th></tr></thead>
      <tbody>
      {{#tasks}}<tr><td class="small">{{id}}</td><td>{{source}}</td><td>{{target}}</td><td>{{state}}</td><td class="num">{{read}}</td><td class="num">{{written}}</td><td class="num">{{pending}}</td><td>{{seq}}</td></tr>{{/tasks}}
      {{^tasks}}<tr class="empty"><td colspan="8" class="muted">No running replications.</td></tr>{{/tasks}}
      </tbody>
    </table>
    {{/content}}{{/layout}}
    """#

    static let metrics = #"""
    {{<layout}}{{$content}}
    <h1>Metrics</h1>
    <section class="glance" id="glance">
      {{#glance}}<div class="card"><div class="value">{{value}}</div><div class="label">{{label}}</div></div>{{/glance}}
    </section>
    <p class="muted">The raw series are at <a href="/_metrics">/_metrics</a> (Prometheus text format).</p>
    <table class="list" id="metrics">
      <thead><tr><th>Series</th><th>Labels</th><th class="num">Value</th></tr></thead>
      <tbody>{{#samples}}<tr><td><code>{{name}}</code></td><td class="small"><code>{{labels}}</code></td><td class="num">{{value}}</td></tr>{{/samples}}</tbody>
    </table>
    {{/content}}{{/layout}}
    """#

    static let security = #"""
    {{<layout}}{{$content}}
    {{>dbnav}}
    <p class="muted">The database's <code>_security</code> object: <code>admins</code> and <code>members</code> (and Settee's
      <code>readers</code>), each with <code>names</code> and <code>roles</code>. With no members anyone may read and write; an
      empty object makes the database public. Only admins may change it.</p>
    <form method="post" action="{{dbHref}}/security" id="security-form">
      {{>csrf}}
      <textarea name="security" id="security-json" rows="14" spellcheck="false">{{json}}</textarea>
      <button type="submit" id="save-security">Save permissions</button>
    </form>
    {{/content}}{{/layout}}
    """#

    static let account = #"""
    {{<layout}}{{$content}}
    <h1>Your account</h1>
    <table class="list kv" id="account">
      <tr><th>Name</th><td id="account-name">{{name}}</td></tr>
      <tr><th>Roles</th><td id="account-roles">{{roles}}</td></tr>
      <tr><th>Signed in with</th><td>{{method}}</td></tr>
    </table>
    {{#canChangePassword}}
    <h2>Change password</h2>
    <form method="post" action="/_utils/account" id="password-form" class="grid">
      {{>csrf}}
      <label>Current password <input type="password" name="current" id="current-password" autocomplete="current-password" required></label>
      <label>New password <input type="password" name="password" id="new-password" autocomplete="new-password" required></label>
      <label>New password again <input type="password" name="confirm" id="confirm-password" autocomplete="new-password" required></label>
      <button type="submit" id="change-password">Change password</button>
    </form>
    <p class="muted small">Changing it signs you out everywhere (every session cookie of yours stops working).</p>
    {{/canChangePassword}}
    {{#configuredAdmin}}<p class="muted">This is the server admin configured where the node starts (<code>--admin</code> or <code>SETTEE_ADMIN</code>); its password is changed there.</p>{{/configuredAdmin}}
    {{/content}}{{/layout}}
    """#

    static let error = #"""
    {{<layout}}{{$content}}
    <h1>{{title}}</h1>
    <p><a href="/_utils/">Back to the databases</a> · use your browser's Back button to return to what you typed.</p>
    {{/content}}{{/layout}}
    """#
}
