import Foundation
import HTTPTypes
import Hummingbird
import Mustache
import NIOCore
import SetteeCore

/// The admin UI at `/_utils`: server-rendered pages (Mustache templates) over the node's own CouchDB API.
///
/// Every page and form reads and writes through ``api(_:_:query:body:rawBody:contentType:)``, which dispatches to
/// the same route handlers as HTTP clients use, as the signed-in user: the UI can do exactly what that user can do
/// with curl, with the same errors. Forms post back to `/_utils/…` and redirect (post/redirect/get); a small script
/// (`/_utils/assets/app.js`) adds the live parts: the change feed, replication progress and index builds.
///
/// This file routes and renders; each family of pages is an extension in `AdminUI+<Family>.swift`, and the models
/// their templates read are in `UIPageModels.swift`.
struct AdminUI {
    let responder: CouchResponder
    var call: Call

    static let root = "/_utils"

    static func handle(_ call: inout Call, responder: CouchResponder) async throws -> Response {
        let ui = AdminUI(responder: responder, call: call)
        do {
            return try await ui.route()
        } catch {
            // Errors are pages for browsers (which ask for text/html); API clients and assets get CouchDB's JSON.
            if call.segments.dropFirst().first == "assets" || !call.accepts("text/html") { throw error }
            let couch = CouchError.from(any: error)
            return try ui.page("error", title: "\(couch.status.code) \(couch.error)", ErrorPage(error: couch.reason),
                               status: couch.status)
        }
    }

    var signedIn: Bool { !call.node.config.hasAdmins || call.userCtx.name != nil }
    var method: HTTPRequest.Method { call.method }

    func route() async throws -> Response {
        let s = Array(call.segments.dropFirst())
        if s.isEmpty && !call.request.uri.path.hasSuffix("/") { return redirect(AdminUI.root + "/") }
        if s.first == "assets" {
            guard s.count == 2, method == .get || method == .head else { throw CouchError.notFound("missing") }
            return try UIAssets.response(named: s[1], request: call.request)
        }
        if s == ["login"] { return try await login() }
        guard signedIn else {
            let next = call.request.uri.path + (call.request.uri.query.map { "?" + $0 } ?? "")
            return redirect("\(AdminUI.root)/login?next=\(AdminUI.encodeQuery(next))")
        }
        var form = FormData(query: nil)
        if method == .post {
            form = FormData(try await bodyBytes())
            try CSRF.check(call, form)
        } else if method != .get && method != .head {
            throw CouchError.methodNotAllowed("GET,HEAD,POST")
        }
        let post = method == .post
        if s.isEmpty { return try await dashboard() }
        switch (s[0], s.count, post) {
        case ("logout", 1, true): return try await logout()
        case ("databases", 1, true): return try await createDatabase(form)
        case ("replication", 1, false): return try await replication()
        case ("replication", 1, true): return try await startReplication(form)
        case ("replication", 2, true) where s[1] == "delete": return try await deleteReplication(form)
        case ("metrics", 1, false): return try await metrics()
        case ("account", 1, false): return try await account()
        case ("account", 1, true): return try await changePassword(form)
        case ("db", 2..., _): return try await database(Array(s.dropFirst()), form: form, post: post)
        default: throw CouchError.notFound("No such page in the admin UI.")
        }
    }

    private func database(_ s: [String], form: FormData, post: Bool) async throws -> Response {
        let db = s[0]
        switch (s.count, post) {
        case (1, false): return try await documents(db)
        case (2, true) where s[1] == "delete": return try await deleteDatabase(db)
        case (2, true) where s[1] == "compact": return try await compact(db)
        case (2, false) where s[1] == "new": return try await newDocument(db)
        case (2, true) where s[1] == "save": return try await saveDocument(db, form)
        case (2, _) where s[1] == "query": return try await query(db)
        case (2, false) where s[1] == "views": return try await views(db)
        case (2, false) where s[1] == "indexes": return try await indexes(db)
        case (2, true) where s[1] == "indexes": return try await createIndex(db, form)
        case (3, true) where s[1] == "indexes" && s[2] == "delete": return try await deleteIndex(db, form)
        case (2, false) where s[1] == "changes": return try await changes(db)
        case (2, false) where s[1] == "security": return try await security(db)
        case (2, true) where s[1] == "security": return try await saveSecurity(db, form)
        case (3, false) where s[1] == "doc": return try await document(db, s[2])
        case (4, true) where s[1] == "doc" && s[3] == "delete": return try await deleteDocument(db, s[2], form)
        case (4, true) where s[1] == "doc" && s[3] == "delete-attachment": return try await deleteAttachment(db, s[2], form)
        case (3, false) where s[1] == "tree": return try await tree(db, s[2])
        case (4, true) where s[1] == "tree" && s[3] == "resolve": return try await resolve(db, s[2], form)
        default: throw CouchError.notFound("No such page in the admin UI.")
        }
    }

    // MARK: Rendering

    func dbHref(_ db: String) -> String { "\(AdminUI.root)/db/\(AdminUI.encodeSegment(db))" }
    func docHref(_ db: String, _ id: String) -> String { "\(dbHref(db))/doc/\(AdminUI.encodeSegment(id))" }
    func treeHref(_ db: String, _ id: String) -> String { "\(dbHref(db))/tree/\(AdminUI.encodeSegment(id))" }

    /// The API path segments of a document (`_design/x` and `_local/x` are two segments there).
    func docSegments(_ db: String, _ id: String) -> [String] {
        for prefix in ["_design/", "_local/"] where id.hasPrefix(prefix) {
            return [db, String(prefix.dropLast()), String(id.dropFirst(prefix.count))]
        }
        return [db, id]
    }

    /// The header of a database page, from the database's info (`GET /{db}`; `.null` when it could not be read).
    func databaseHeader(_ db: String, _ info: JSON) -> DatabaseHeader {
        DatabaseHeader(
            db: db, dbHref: dbHref(db),
            dbDocs: info["doc_count"]?.intValue.map(String.init) ?? "—",
            dbDeleted: info["doc_del_count"]?.intValue.map(String.init) ?? "—",
            dbSize: UIFormat.bytes(info["sizes"]?["file"]?.intValue),
            dbSeq: info["update_seq"].map(UIFormat.cell) ?? "")
    }

    func bodyBytes() async throws -> [UInt8] {
        var c = call
        return try await c.bodyBytes()
    }

    func redirect(_ location: String, notice: String? = nil, error: String? = nil) -> Response {
        var url = location
        var params: [String] = []
        if let notice { params.append("notice=" + AdminUI.encodeQuery(notice)) }
        if let error { params.append("error=" + AdminUI.encodeQuery(error)) }
        if !params.isEmpty { url += (url.contains("?") ? "&" : "?") + params.joined(separator: "&") }
        var headers = HTTPFields()
        headers[.location] = url
        headers[.cacheControl] = "no-store"
        return Response(status: .seeOther, headers: headers)
    }

    func errorPage(_ result: APIResult, title: String) throws -> Response {
        try page("error", title: title, ErrorPage(error: result.message), status: HTTPResponse.Status(code: result.status))
    }

    /// Renders `template` with `model` inside the layout; `database` adds the header of a database page.
    func page<Model>(_ template: String, title: String, _ model: Model, database: DatabaseHeader? = nil, nav: String = "",
                     status: HTTPResponse.Status = .ok, chrome: Bool = true) throws -> Response {
        let q = FormData(query: call.request.uri.query)
        let context = UIPageContext(
            title: title, csrf: CSRF.token(for: call),
            user: call.userCtx.name ?? (!call.node.config.hasAdmins ? "admin party" : ""),
            canSignOut: call.userCtx.name != nil && call.node.config.hasAdmins,
            asset: UIAssets.version, chrome: chrome, nav: nav, database: database, model: model,
            notice: q.text("notice"), error: q.text("error"))
        guard let html = UITemplates.library.render(context, withTemplate: template) else {
            throw CouchError(.internalServerError, "internal_server_error", "missing UI template \(template)")
        }
        return AdminUI.html(status, html)
    }

    static func html(_ status: HTTPResponse.Status, _ html: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        headers[HTTPField.Name("Content-Security-Policy")!] =
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
    }
}
