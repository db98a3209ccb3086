import Foundation
import SetteeTestSupport
import XCTest

/// A page on another origin runs a small CouchDB replication client in plain JavaScript (Tests/Browser/couch-sync.js)
/// and syncs with a `settee serve` node through CORS, logged in with the AuthSession cookie from a cross-origin
/// `POST /_session`. Headless Chromium drives the page over WebDriver; the test checks both the page (DOM) and the
/// server (HTTP). The tests skip when Chromium / chromedriver aren't installed.
final class CrossOriginSyncTests: XCTestCase {
    static let admin = "admin:secret"

    /// Tests/Browser, where sync.html and couch-sync.js live.
    static var pagesDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Browser").path
    }

    // MARK: the test itself

    func testPullAndPushFromAnotherOriginWithCookieSession() throws {
        let browser = try launchBrowserOrSkip()
        defer { browser.close() }
        let pagePort = freePort()
        let data = TempDir()
        let server = try ServerProcess(dataDirectory: data.path, admin: Self.admin, extraArguments: [
            "--cors-origins", "http://127.0.0.1:\(pagePort)", "--cors-credentials"])
        defer { server.stop() }
        let couch = Couch(port: server.port)

        // The database and five documents, over HTTP.
        XCTAssertEqual(try couch.call("PUT", "/browsersync").status, 201)
        let seed = (1...5).map { ["_id": "doc-\($0)", "title": "Title \($0)", "n": $0] as [String: Any] }
        XCTAssertEqual(try couch.call("POST", "/browsersync/_bulk_docs", ["docs": seed]).status, 201)
        // Without credentials the database is closed: the page's pulls below only work with the cookie.
        XCTAssertEqual(try couch.call("GET", "/browsersync", auth: false).status, 401)

        let pages = try StaticServer(directory: Self.pagesDirectory, port: pagePort)
        defer { pages.stop() }
        try browser.go("http://127.0.0.1:\(pagePort)/sync.html?server=http://127.0.0.1:\(server.port)&db=browsersync")
        try browser.waitForText("#origin", contains: "http://127.0.0.1:\(pagePort)")

        // Log in cross-origin: POST /_session sets the AuthSession cookie for later credentialed fetches.
        try browser.find("#name").type("admin")
        try browser.find("#password").type("secret")
        try browser.find("#login").click()
        try browser.waitForText("#status", contains: "login ok", timeout: 30)

        // Pull: the page shows the five documents, at the server's revisions.
        try browser.find("#pull").click()
        try browser.waitForText("#status", contains: "pull ok", timeout: 30)
        try browser.waitForText("#count", contains: "5")
        let items = try browser.findAll("li.doc")
        XCTAssertEqual(items.count, 5)
        try browser.waitForText("#docs", contains: "doc-3: Title 3")
        let doc1 = try couch.json("GET", "/browsersync/doc-1")
        XCTAssertEqual(try items.first?.attribute("data-id"), "doc-1")
        XCTAssertEqual(try items.first?.attribute("data-rev"), doc1["_rev"] as? String)
        let firstPull = try XCTUnwrap(browser.execute("return window.app.lastStats") as? [String: Any])
        XCTAssertEqual(firstPull["docs_read"] as? Int, 5)
        XCTAssertEqual(firstPull["since"] as? Int, 0)
        let pullCheckpoint = try XCTUnwrap(firstPull["checkpoint"] as? String)
        let requests = try XCTUnwrap(browser.execute("return window.app.replicator.requests") as? [String])
        XCTAssertTrue(requests.contains { $0.hasPrefix("GET /_changes?style=all_docs&since=") }, "\(requests)")
        XCTAssertTrue(requests.contains("POST /_bulk_get?revs=true"), "\(requests)")
        try browser.screenshot("cross-origin-sync-1-pulled")

        // Local edits: a new document, and an update of a pulled one (typed into the page's form).
        let idField = try browser.find("#doc-id"), titleField = try browser.find("#doc-title")
        try idField.type("page-1")
        try titleField.type("Made in the browser")
        try browser.find("#save").click()
        try browser.waitForText("#status", contains: "save ok")
        try idField.clear()
        try titleField.clear()
        try idField.type("doc-2")
        try titleField.type("Edited in the browser")
        XCTAssertEqual(try idField.property("value"), "doc-2")
        try browser.find("#save").click()
        try browser.waitForText("#status", contains: "save ok")
        try browser.waitForText("#docs", contains: "doc-2: Edited in the browser")
        let pageRevs = try XCTUnwrap(browser.execute(
            "return {page1: app.store.get('page-1')._rev, doc2: app.store.get('doc-2')._rev}") as? [String: String])
        let page1Rev = try XCTUnwrap(pageRevs["page1"]), doc2Rev = try XCTUnwrap(pageRevs["doc2"])
        XCTAssertTrue(page1Rev.range(of: #"^1-[0-9a-f]{32}$"#, options: .regularExpression) != nil, page1Rev)
        XCTAssertTrue(doc2Rev.range(of: #"^2-[0-9a-f]{32}$"#, options: .regularExpression) != nil, doc2Rev)

        // Push: _revs_diff then _bulk_docs with new_edits:false; the server holds the page's revisions.
        try browser.find("#push").click()
        try browser.waitForText("#status", contains: "push ok", timeout: 30)
        let push = try XCTUnwrap(browser.execute("return window.app.lastStats") as? [String: Any])
        XCTAssertEqual(push["docs_written"] as? Int, 2, "\(push)")
        let pushRequests = try XCTUnwrap(browser.execute("return window.app.replicator.requests") as? [String])
        XCTAssertTrue(pushRequests.contains("POST /_revs_diff") && pushRequests.contains("POST /_bulk_docs"), "\(pushRequests)")
        let page1 = try couch.json("GET", "/browsersync/page-1")
        XCTAssertEqual(page1["_rev"] as? String, page1Rev)
        XCTAssertEqual(page1["title"] as? String, "Made in the browser")
        let doc2 = try couch.json("GET", "/browsersync/doc-2?revs=true")
        XCTAssertEqual(doc2["_rev"] as? String, doc2Rev)
        XCTAssertEqual(doc2["title"] as? String, "Edited in the browser")
        XCTAssertEqual(doc2["n"] as? Int, 2)
        let history = try XCTUnwrap(doc2["_revisions"] as? [String: Any])
        XCTAssertEqual(history["start"] as? Int, 2)
        XCTAssertEqual((history["ids"] as? [String])?.count, 2, "the page's edit descends from the server's revision")
        XCTAssertNil(try couch.json("GET", "/browsersync/doc-2?conflicts=true")["_conflicts"])
        let pushCheckpoint = try XCTUnwrap(push["checkpoint"] as? String)
        XCTAssertEqual(try couch.call("GET", "/browsersync/\(pushCheckpoint)").status, 200)

        // A change on the server, then a second pull: it starts from the checkpoint on the server, so the changes
        // feed holds only what came after the first pull (the two pushed documents and the server's edit), and
        // _bulk_get fetches only the server's edit.
        let pulledCheckpoint = try couch.json("GET", "/browsersync/\(pullCheckpoint)")
        XCTAssertNotNil(pulledCheckpoint["last_seq"], "\(pulledCheckpoint)")
        var doc4 = try couch.json("GET", "/browsersync/doc-4")
        doc4["title"] = "Changed on the server"
        XCTAssertEqual(try couch.call("PUT", "/browsersync/doc-4", doc4).status, 201)
        try browser.find("#pull").click()
        try browser.waitForText("#status", contains: "pull ok", timeout: 30)
        try browser.waitForText("#docs", contains: "doc-4: Changed on the server")
        let secondPull = try XCTUnwrap(browser.execute("return window.app.lastStats") as? [String: Any])
        XCTAssertEqual(secondPull["docs_read"] as? Int, 1, "\(secondPull)")
        XCTAssertEqual(Set(secondPull["changed_ids"] as? [String] ?? []), ["page-1", "doc-2", "doc-4"], "\(secondPull)")
        XCTAssertNotEqual(secondPull["since"] as? Int, 0, "\(secondPull)")
        let checkpointAfter = try couch.json("GET", "/browsersync/\(pullCheckpoint)")
        XCTAssertNotEqual("\(checkpointAfter["last_seq"] ?? "")", "\(pulledCheckpoint["last_seq"] ?? "")")
        XCTAssertEqual(try browser.findAll("li.doc").count, 6)
        try browser.screenshot("cross-origin-sync-2-second-pull")
    }

    /// The same page served from an origin the node doesn't allow: the browser refuses the responses (fetch rejects),
    /// and the page reports the failure.
    func testOriginNotAllowedIsBlocked() throws {
        let browser = try launchBrowserOrSkip()
        defer { browser.close() }
        let allowedPort = freePort(), otherPort = freePort()
        let data = TempDir()
        let server = try ServerProcess(dataDirectory: data.path, admin: Self.admin, extraArguments: [
            "--cors-origins", "http://127.0.0.1:\(allowedPort)", "--cors-credentials"])
        defer { server.stop() }
        let couch = Couch(port: server.port)
        XCTAssertEqual(try couch.call("PUT", "/browsersync").status, 201)

        let pages = try StaticServer(directory: Self.pagesDirectory, port: otherPort)
        defer { pages.stop() }
        try browser.go("http://127.0.0.1:\(otherPort)/sync.html?server=http://127.0.0.1:\(server.port)&db=browsersync")
        try browser.find("#name").type("admin")
        try browser.find("#password").type("secret")
        try browser.find("#login").click()
        let loginText = try browser.waitForText("#status", contains: "login failed", timeout: 30).text
        XCTAssertTrue(loginText.contains("TypeError"), loginText)  // fetch rejected: a network (CORS) error
        try browser.find("#pull").click()
        let pullText = try browser.waitForText("#status", contains: "pull failed", timeout: 30).text
        XCTAssertTrue(pullText.contains("TypeError"), pullText)
        XCTAssertEqual(try browser.find("#count").text, "0")
        try browser.screenshot("cross-origin-sync-blocked")

        // The node itself is fine; it just gives that origin no CORS headers.
        let direct = try blockingHTTP("POST", "http://127.0.0.1:\(server.port)/_session",
                                      body: Data(#"{"name":"admin","password":"secret"}"#.utf8),
                                      headers: ["Origin": "http://127.0.0.1:\(otherPort)"])
        XCTAssertEqual(direct.status, 200)
        XCTAssertNil(direct.headers["access-control-allow-origin"])
    }
}

// MARK: helpers

/// Admin HTTP calls to the node.
struct Couch {
    let port: Int

    func call(_ method: String, _ path: String, _ body: Any? = nil, auth: Bool = true) throws -> (status: Int, json: Any?) {
        var headers = ["Accept": "application/json"]
        if auth { headers["Authorization"] = "Basic " + Data(CrossOriginSyncTests.admin.utf8).base64EncodedString() }
        let data = try body.map { try JSONSerialization.data(withJSONObject: $0) }
        let r = try blockingHTTP(method, "http://127.0.0.1:\(port)\(path)", body: data, headers: headers, timeout: 60)
        return (r.status, try? JSONSerialization.jsonObject(with: r.body, options: [.fragmentsAllowed]))
    }

    /// A JSON object answer with a 2xx status, or a failure naming the call.
    func json(_ method: String, _ path: String, _ body: Any? = nil) throws -> [String: Any] {
        let r = try call(method, path, body)
        guard (200..<300).contains(r.status), let object = r.json as? [String: Any] else {
            throw ServerProcessError(message: "\(method) \(path) -> \(r.status) \(String(describing: r.json))")
        }
        return object
    }
}

/// `python3 -m http.server` serving a directory on 127.0.0.1:PORT (the pages' origin).
final class StaticServer: @unchecked Sendable {
    let process = SpawnedProcess()
    let port: Int

    init(directory: String, port: Int) throws {
        self.port = port
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-u", "-m", "http.server", "--bind", "127.0.0.1", String(port), "--directory", directory]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            guard process.isRunning else {
                throw ServerProcessError(message: "python3 -m http.server exited (port \(port) taken?)")
            }
            if let r = try? blockingHTTP("GET", "http://127.0.0.1:\(port)/sync.html", timeout: 5), r.status == 200 { return }
            Thread.sleep(forTimeInterval: 0.1)
        }
        stop()
        throw ServerProcessError(message: "python3 -m http.server did not answer on port \(port) within 30 s")
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}
