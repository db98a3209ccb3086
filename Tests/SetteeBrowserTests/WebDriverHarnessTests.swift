import Foundation
import SetteeTestSupport
import XCTest

/// Starts the browser, or skips the test (with the reason) when Chromium / chromedriver aren't installed.
func launchBrowserOrSkip() throws -> Browser {
    do {
        return try Browser.launch()
    } catch let e as BrowserUnavailable {
        throw XCTSkip("Browser tests need Chromium and chromedriver (scripts/install-deps.sh installs them): \(e.description)")
    }
}

/// The harness itself (Tests/SetteeTestSupport/WebDriver.swift), on a page that needs no server.
final class WebDriverHarnessTests: XCTestCase {
    func testElementsScriptsDialogsAndErrors() throws {
        let browser = try launchBrowserOrSkip()
        defer { browser.close() }
        let html = """
            <title>harness</title><input id="q" name="query" value="">
            <button id="b" onclick="document.getElementById('out').textContent = confirm('Sure?') ? 'confirmed' : 'cancelled'">go</button>
            <p id="out"></p><ul><li class="i">one</li><li class="i">two</li></ul>
            """
        try browser.go("data:text/html;charset=utf-8," + html.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        XCTAssertTrue(try browser.currentURL.hasPrefix("data:text/html"))

        let q = try browser.find("#q")
        try q.type("hello")
        XCTAssertEqual(try q.property("value"), "hello")
        try q.clear()
        XCTAssertEqual(try q.property("value"), "")
        XCTAssertEqual(try q.attribute("name"), "query")
        XCTAssertNil(try q.attribute("data-nothing"))
        XCTAssertEqual(try browser.findAll("li.i").map { try $0.text }, ["one", "two"])
        XCTAssertEqual(try browser.findAll("li.none").count, 0)

        // window.confirm, accepted.
        try browser.find("#b").click()
        try browser.acceptAlert()
        try browser.waitForText("#out", contains: "confirmed")

        // Scripts: arguments, results (elements come back as Element), async callbacks, errors with the driver's message.
        XCTAssertEqual(try browser.execute("return arguments[0] + arguments[1]", [40, 2]) as? Int, 42)
        let element = try XCTUnwrap(browser.execute("return document.getElementById('q')") as? Element)
        XCTAssertEqual(try element.attribute("id"), "q")
        XCTAssertEqual(try browser.execute("return arguments[0].id", [element]) as? String, "q")
        XCTAssertEqual(try browser.executeAsync(
            "const done = arguments[arguments.length - 1]; setTimeout(() => done({twice: arguments[0] * 2}), 20)", [21])
            as? [String: Int], ["twice": 42])
        XCTAssertThrowsError(try browser.execute("throw new Error('boom from the page')")) { error in
            XCTAssertTrue("\(error)".contains("boom from the page"), "\(error)")
        }

        // A find that times out names the selector and the page.
        let start = Date()
        XCTAssertThrowsError(try browser.find("#never-there", timeout: 0.5)) { error in
            XCTAssertTrue("\(error)".contains("#never-there") && "\(error)".contains("data:text/html"), "\(error)")
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 10)
        XCTAssertThrowsError(try browser.waitForText("#out", contains: "never", timeout: 0.5)) { error in
            XCTAssertTrue("\(error)".contains("confirmed"), "the message shows what the element said: \(error)")
        }

        let path = try browser.screenshot("harness")
        XCTAssertTrue(FileManager.default.fileExists(atPath: path), path)
        XCTAssertTrue(path.hasSuffix("/harness.png"), path)
    }
}
