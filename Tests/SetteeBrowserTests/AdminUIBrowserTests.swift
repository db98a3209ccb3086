import Foundation
import SetteeTestSupport
import XCTest

/// The admin UI at `/_utils`, driven in headless Chromium against a `settee serve` child process: sign in, create a
/// database, add and edit a document (and see an MVCC error), make a conflict with `new_edits=false` and resolve it on
/// the tree page, run a query, build an index, watch the change feed live, and run a replication until the page shows
/// it completed. Assertions are on the page's DOM; every step saves a screenshot (docs/ui.md uses them).
final class AdminUIBrowserTests: XCTestCase {
    func testTheAdminUIEndToEnd() throws {
        let browser = try launchBrowserOrSkip()
        defer { browser.close() }
        let data = TempDir()
        let server = try ServerProcess(dataDirectory: data.path, admin: CrossOriginSyncTests.admin)
        defer { server.stop() }
        let couch = Couch(port: server.port)
        let base = "http://127.0.0.1:\(server.port)"

        // Sign in: an anonymous visit lands on the sign-in page; a wrong password is shown, the right one lets us in.
        try browser.go(base + "/_utils/")
        try browser.find("#login-form")
        XCTAssertTrue(try browser.currentURL.contains("/_utils/login"))
        try browser.find("#login-name").type("admin")
        try browser.find("#login-password").type("wrong")
        try browser.find("#login-submit").click()
        try browser.waitForText("#error", contains: "Name or password is incorrect")
        try browser.screenshot("ui-01-sign-in")
        try browser.find("#login-name").clear()
        try browser.find("#login-name").type("admin")
        try browser.find("#login-password").type("secret")
        try browser.find("#login-submit").click()
        try browser.waitForText("#signed-in-as", contains: "admin")

        // Create a database.
        try browser.find("#new-db-name").type("inventory")
        try browser.find("#create-db").click()
        try browser.waitForText("#notice", contains: "Created database inventory")
        XCTAssertEqual(try browser.find("#db-name").text, "inventory")

        // Add a document.
        try browser.find("#new-doc").click()
        try setEditor(browser, #"{"_id": "widget", "name": "Widget", "stock": 3}"#)
        try browser.find("#save-doc").click()
        try browser.waitForText("#notice", contains: "Saved widget as revision 1-")
        let rev1 = try browser.find("#doc-rev").text
        XCTAssertTrue(rev1.hasPrefix("1-"))
        XCTAssertEqual(try couch.json("GET", "/inventory/widget")["stock"] as? Int, 3)

        // Edit it: the editor holds the current _rev, so saving a change makes revision 2.
        let shown = try XCTUnwrap(browser.find("#doc-json").property("value"))
        XCTAssertTrue(shown.contains(#""_rev": "\#(rev1)""#), shown)
        try setEditor(browser, #"{"_id": "widget", "_rev": "\#(rev1)", "name": "Widget", "stock": 7}"#)
        try browser.find("#save-doc").click()
        try browser.waitForText("#notice", contains: "as revision 2-")
        XCTAssertEqual(try couch.json("GET", "/inventory/widget")["stock"] as? Int, 7)
        // Saving the stale revision again is refused with CouchDB's conflict, and what was typed stays in the editor.
        try setEditor(browser, #"{"_id": "widget", "_rev": "\#(rev1)", "stock": 99}"#)
        try browser.find("#save-doc").click()
        try browser.waitForText("#error", contains: "409 conflict: Document update conflict.")
        XCTAssertTrue(try XCTUnwrap(browser.find("#doc-json").property("value")).contains("99"))
        try browser.screenshot("ui-04-document-conflict-error")
        XCTAssertEqual(try couch.json("GET", "/inventory/widget")["stock"] as? Int, 7)
        // An attachment, uploaded from a file input.
        try browser.go(base + "/_utils/db/inventory/doc/widget")
        let file = (data.path as NSString).appendingPathComponent("label.txt")
        try "Widget label\n".write(toFile: file, atomically: true, encoding: .utf8)
        try browser.find("#attachment-file").type(file)
        try browser.find("#attachment-upload button").click()
        try browser.waitForText("#notice", contains: "Uploaded label.txt", timeout: 30)
        try browser.waitForText("#attachments .attachment-link", contains: "label.txt")
        try browser.find("#doc-json")
        try browser.screenshot("ui-03-document")
        let attachment = try blockingHTTP("GET", base + "/inventory/widget/label.txt",
                                          headers: ["Authorization": "Basic " + Data("admin:secret".utf8).base64EncodedString()])
        XCTAssertEqual(attachment.status, 200)
        XCTAssertEqual(String(decoding: attachment.body, as: UTF8.self), "Widget label\n")
        XCTAssertTrue(try browser.find("#doc-rev").text.hasPrefix("3-"), "an attachment makes a new revision")

        // A conflict, the way replication makes one: a sibling of revision 2 written with new_edits=false.
        let digest1 = String(rev1.split(separator: "-")[1])
        let sibling: [String: Any] = ["_id": "widget", "_rev": "2-0000aaaa", "name": "Widget (other node)", "stock": 5,
                                      "_revisions": ["start": 2, "ids": ["0000aaaa", digest1]]]
        XCTAssertEqual(try couch.call("POST", "/inventory/_bulk_docs", ["new_edits": false, "docs": [sibling]]).status, 201)
        try browser.go(base + "/_utils/db/inventory/doc/widget")
        try browser.waitForText("#conflicts", contains: "conflicts")
        try browser.find("#resolve-link").click()
        try browser.find("#revtree")
        XCTAssertEqual(try browser.findAll("#revtree a[data-state='conflict']").count, 1)
        XCTAssertEqual(try browser.findAll("#revtree a[data-state='winner']").count, 1)
        XCTAssertEqual(try browser.findAll("#revtree [data-state='ancestor']").count, 2)
        try browser.waitForText("#conflict-summary", contains: "1 conflicting")
        try browser.screenshot("ui-05-revision-tree-conflict")
        // Resolve by keeping the other node's version.
        try browser.find("tr[data-rev='2-0000aaaa'] button.keep").click()
        try browser.acceptAlert()
        try browser.waitForText("#notice", contains: "Resolved: kept 2-0000aaaa")
        try browser.find("#no-conflicts")
        XCTAssertEqual(try browser.find("#winner-rev").text, "2-0000aaaa")
        XCTAssertEqual(try browser.findAll("#revtree a[data-state='deleted']").count, 1, "the loser is now a tombstone")
        try browser.screenshot("ui-06-revision-tree-resolved")
        let resolved = try couch.json("GET", "/inventory/widget?conflicts=true")
        XCTAssertEqual(resolved["_rev"] as? String, "2-0000aaaa")
        XCTAssertNil(resolved["_conflicts"])

        // More documents, then the document list.
        let more = (1...12).map { ["_id": "item-\(String(format: "%02d", $0))", "type": "item", "color": $0 % 2 == 0 ? "red" : "blue", "n": $0] as [String: Any] }
        XCTAssertEqual(try couch.call("POST", "/inventory/_bulk_docs", ["docs": more]).status, 201)
        try browser.go(base + "/_utils/db/inventory")
        try browser.waitForText("#db-doc-count", contains: "13")
        XCTAssertEqual(try browser.findAll("#documents tr[data-id]").count, 13)
        try browser.screenshot("ui-02-documents")

        // An index, made in the form.
        try browser.go(base + "/_utils/db/inventory/indexes")
        try browser.find("#index-name").type("byColor")
        try browser.find("#index-expressions").type("color")
        try browser.find("#create-index").click()
        try browser.waitForText("#notice", contains: "Index byColor: created")
        try browser.waitForText("tr[data-index='byColor'] .index-state", contains: "ready")
        try browser.screenshot("ui-08-indexes")

        // A query with a parameter: rows in the table, the plan names the index.
        try browser.go(base + "/_utils/db/inventory/query")
        try browser.find("#query-text").clear()
        try browser.find("#query-text").type("SELECT META().id AS id, n FROM _ WHERE color = $color ORDER BY n")
        try browser.find("#query-params").type(#"{"color": "red"}"#)
        try browser.find("#run-query").click()
        try browser.waitForText("#row-count", contains: "6")
        XCTAssertEqual(try browser.findAll("#results tbody tr").count, 6)
        try browser.waitForText("#results tbody tr:first-child", contains: "item-02")
        try browser.waitForText("#plan", contains: "byColor")
        try browser.screenshot("ui-07-query")

        // The change feed, live: a write made elsewhere appears on the page without a reload.
        try browser.go(base + "/_utils/db/inventory/changes")
        try browser.waitForText("#feed-state", contains: "live", timeout: 30)
        XCTAssertEqual(try couch.call("PUT", "/inventory/arrived-live", ["hello": "world"]).status, 201)
        try browser.waitForText("#changes tr.live-change", contains: "arrived-live", timeout: 30)
        try browser.screenshot("ui-09-changes")

        // A replication to a new database, started in the form; the page follows it until it completes.
        try browser.go(base + "/_utils/replication")
        // (The source and target inputs suggest database names in a drop-down; the job id, typed last, closes it.)
        try browser.find("#rep-source").type("inventory")
        try browser.find("#rep-target").type("inventory-copy")
        try browser.find("#rep-create-target").click()
        try browser.find("#rep-id").type("copy-inventory")
        try browser.find("#rep-id").type("\u{E007}")  // Enter: submits the form
        try browser.waitForText("#notice", contains: "Started replication copy-inventory")
        try browser.waitForText("tr[data-doc='copy-inventory'] .state", contains: "completed", timeout: 60)
        try browser.screenshot("ui-10-replication")
        XCTAssertEqual(try couch.json("GET", "/inventory-copy")["doc_count"] as? Int, 14)

        // Permissions: the _security object as JSON.
        try browser.go(base + "/_utils/db/inventory/security")
        let security = try browser.find("#security-json")
        try security.clear()
        try security.type(#"{"admins": {"names": [], "roles": []}, "members": {"names": ["alice"], "roles": ["staff"]}}"#)
        try browser.find("#save-security").click()
        try browser.waitForText("#notice", contains: "Saved the permissions of inventory")
        try browser.screenshot("ui-12-permissions")
        let members = try couch.json("GET", "/inventory/_security")["members"] as? [String: Any]
        XCTAssertEqual(members?["names"] as? [String], ["alice"])

        // Metrics at a glance, and the databases with their counts.
        try browser.go(base + "/_utils/metrics")
        try browser.waitForText("#glance", contains: "HTTP requests")
        try browser.screenshot("ui-11-metrics")
        try browser.go(base + "/_utils/")
        try browser.waitForText("tr[data-db='inventory-copy'] .doc-count", contains: "14")
        try browser.screenshot("ui-00-databases")

        // Your account: name and roles (the configured admin's password is set where the node starts).
        try browser.find("#signed-in-as").click()
        try browser.waitForText("#account-roles", contains: "_admin")
        try browser.screenshot("ui-13-account")

        // Sign out: the next page asks to sign in again.
        try browser.find("#sign-out").click()
        try browser.find("#login-form")
    }

    /// Replaces the JSON editor's text.
    private func setEditor(_ browser: Browser, _ text: String) throws {
        let editor = try browser.find("#doc-json")
        try editor.clear()
        try editor.type(text)
    }
}
