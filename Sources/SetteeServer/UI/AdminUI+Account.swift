import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore

/// Signing in and out (`/_utils/login`, `/_utils/logout`) through the node's `_session`, and the signed-in user's
/// page (`/_utils/account`), where a `_users` member changes their password.
extension AdminUI {
    func login() async throws -> Response {
        let query = FormData(query: call.request.uri.query)
        var next = query["next"] ?? AdminUI.root + "/"
        if !next.hasPrefix(AdminUI.root) || next.hasPrefix("//") { next = AdminUI.root + "/" }
        if method == .post {
            let form = FormData(try await bodyBytes())
            try CSRF.checkOrigin(call)
            let name = form["name"] ?? "", password = form["password"] ?? ""
            let result = await api(.post, ["_session"], body: ["name": .string(name), "password": .string(password)])
            if result.ok, let cookie = result.headers[.setCookie] {
                var response = redirect(next)
                response.headers[.setCookie] = cookie
                return response
            }
            return try page("login", title: "Sign in", LoginPage(nextEncoded: AdminUI.encodeQuery(next), name: name, error: result.message),
                            status: result.status == 403 ? .forbidden : .unauthorized, chrome: false)
        }
        if !call.node.config.hasAdmins { return redirect(next) }
        return try page("login", title: "Sign in", LoginPage(nextEncoded: AdminUI.encodeQuery(next)), chrome: false)
    }

    func logout() async throws -> Response {
        let result = await api(.delete, ["_session"])
        var response = redirect("\(AdminUI.root)/login")
        response.headers[.setCookie] = result.headers[.setCookie] ?? SessionCookies.clearHeader
        return response
    }

    func account(error: String? = nil, status: HTTPResponse.Status = .ok) async throws -> Response {
        let session = await api(.get, ["_session"])
        let ctx = session.json["userCtx"]
        var model = AccountPage(
            name: ctx?["name"]?.stringValue ?? "",
            roles: (ctx?["roles"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", "),
            method: session.json["info"]?["authenticated"]?.stringValue ?? "",
            error: error)
        if let name = call.userCtx.name, call.node.config.snapshot.admins[name] == nil {
            model.canChangePassword = true
        } else if call.node.config.hasAdmins, call.userCtx.name != nil {
            model.configuredAdmin = true
        }
        return try page("account", title: "Your account", model, nav: "account", status: status)
    }

    /// A `_users` member changes their own password: the same `PUT /_users/org.couchdb.user:NAME` a CouchDB client
    /// makes (the `_users` rules let a user update their own document), after checking the current password.
    func changePassword(_ form: FormData) async throws -> Response {
        guard let name = call.userCtx.name, call.node.config.snapshot.admins[name] == nil else {
            return try await account(error: "The server admin's password is set where the node starts (--admin or SETTEE_ADMIN).", status: .badRequest)
        }
        let current = form["current"] ?? "", new = form["password"] ?? ""
        guard new.count >= 1, new == form["confirm"] else {
            return try await account(error: "The new passwords are empty or do not match.", status: .badRequest)
        }
        guard try await Auth.login(call, name: name, password: current) != nil else {
            return try await account(error: "The current password is not right.", status: .forbidden)
        }
        let docID = "org.couchdb.user:" + name
        let existing = await api(.get, ["_users", docID])
        guard existing.ok, case .object(var doc) = existing.json else { return try await account(error: existing.message, status: .badRequest) }
        doc["password"] = .string(new)
        let saved = await api(.put, ["_users", docID], body: .object(doc))
        guard saved.ok else { return try await account(error: saved.message, status: HTTPResponse.Status(code: saved.status)) }
        // The new salt ends every session of this user, this one included: sign in again.
        var response = redirect("\(AdminUI.root)/login?notice=" + AdminUI.encodeQuery("Password changed: sign in with the new one."))
        response.headers[.setCookie] = SessionCookies.clearHeader
        return response
    }
}
