public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// A small W3C WebDriver client for browser tests: starts chromedriver on a free port, opens a headless Chromium
// session and speaks the WebDriver JSON protocol over HTTP. Every call blocks (semaphores), so call it from
// synchronous XCTest methods or inside `offThePool { }`, never directly on Swift's cooperative pool.

/// Chromium or chromedriver isn't installed (or won't start): browser tests skip with this message.
public struct BrowserUnavailable: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// An error answered by chromedriver (`error` is the W3C error code, `message` the driver's message), or a
/// harness failure such as a `find` that timed out.
public struct WebDriverError: Error, CustomStringConvertible {
    public let error: String
    public let message: String
    public init(error: String, message: String) { self.error = error; self.message = message }
    public var description: String { "WebDriver \(error): \(message)" }
}

/// A blocking HTTP exchange (for tests talking to servers outside the browser, too).
/// Returns the status, the body and the response headers (names lowercased).
public func blockingHTTP(_ method: String, _ url: String, body: Data? = nil, headers: [String: String] = [:],
                         timeout: Double = 60) throws -> (status: Int, body: Data, headers: [String: String]) {
    guard let u = URL(string: url) else { throw WebDriverError(error: "bad url", message: url) }
    var request = URLRequest(url: u, timeoutInterval: timeout)
    request.httpMethod = method
    request.httpBody = body
    for (k, v) in headers { request.setValue(v, forHTTPHeaderField: k) }
    if body != nil && headers["Content-Type"] == nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
    final class Box: @unchecked Sendable { var data: Data?; var response: URLResponse?; var error: Error? }
    let box = Box()
    let done = DispatchSemaphore(value: 0)
    HTTPSessionHolder.session.dataTask(with: request) { data, response, error in
        box.data = data; box.response = response; box.error = error
        done.signal()
    }.resume()
    done.wait()
    if let error = box.error { throw error }
    guard let http = box.response as? HTTPURLResponse else {
        throw WebDriverError(error: "no response", message: "\(method) \(url)")
    }
    var out: [String: String] = [:]
    for (k, v) in http.allHeaderFields { out[String(describing: k).lowercased()] = String(describing: v) }
    return (http.statusCode, box.data ?? Data(), out)
}

/// A blocking HTTP/1.1 exchange over a plain socket, for chromedriver: its responses say `Content-Length:249` (no
/// space), which swift-corelibs-foundation's URLSession (libcurl) rejects with "Failed writing header".
/// `Connection: close`; the body is read by Content-Length, chunked encoding, or to the end of the stream.
func socketHTTP(_ method: String, host: String = "127.0.0.1", port: Int, path: String, body: Data? = nil,
                timeout: Double = 60) throws -> (status: Int, body: Data) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw WebDriverError(error: "socket", message: String(cString: strerror(errno))) }
    defer { close(fd) }
    #if os(Linux)
    let noSigPipe = Int32(MSG_NOSIGNAL)
    #else
    let noSigPipe: Int32 = 0
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
    #endif
    var tv = timeval(tv_sec: Int(timeout), tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr(host)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    let connected = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        throw WebDriverError(error: "connect", message: "\(host):\(port): \(String(cString: strerror(errno)))")
    }
    var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\nAccept: application/json\r\n"
    if let body { head += "Content-Type: application/json; charset=utf-8\r\nContent-Length: \(body.count)\r\n" }
    head += "\r\n"
    var out = Data(head.utf8)
    if let body { out.append(body) }
    try out.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
        var sent = 0
        while sent < raw.count {
            let n = send(fd, raw.baseAddress! + sent, raw.count - sent, noSigPipe)
            guard n > 0 else { throw WebDriverError(error: "send", message: "\(method) \(path): \(String(cString: strerror(errno)))") }
            sent += n
        }
    }
    var received = Data()
    var buffer = [UInt8](repeating: 0, count: 65536)
    let separator = Data("\r\n\r\n".utf8)
    var headerEnd: Range<Data.Index>? = nil
    var contentLength: Int? = nil
    var chunked = false
    var status = 0
    while true {
        if let end = headerEnd, let length = contentLength, received.count - end.upperBound >= length { break }
        let n = recv(fd, &buffer, buffer.count, 0)
        if n < 0 {
            if errno == EINTR { continue }
            throw WebDriverError(error: "timeout", message: "\(method) \(path): no answer from the driver within \(Int(timeout)) s (\(String(cString: strerror(errno))))")
        }
        if n == 0 { break }
        received.append(buffer, count: n)
        if headerEnd == nil, let r = received.range(of: separator) {
            headerEnd = r
            let lines = String(decoding: received[..<r.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
            let statusParts = (lines.first ?? "").split(separator: " ")
            status = statusParts.count > 1 ? Int(statusParts[1]) ?? 0 : 0
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                if name == "content-length" { contentLength = Int(value) }
                if name == "transfer-encoding" && value.lowercased().contains("chunked") { chunked = true }
            }
        }
    }
    guard let end = headerEnd else {
        throw WebDriverError(error: "bad answer", message: "\(method) \(path): \(String(decoding: received, as: UTF8.self))")
    }
    var payload = Data(received[end.upperBound...])
    if let length = contentLength, payload.count > length { payload = payload.prefix(length) }
    if chunked { payload = dechunk(payload) }
    return (status, payload)
}

private func dechunk(_ data: Data) -> Data {
    var out = Data()
    var rest = data[...]
    let crlf = Data("\r\n".utf8)
    while let line = rest.range(of: crlf) {
        let size = Int(String(decoding: rest[..<line.lowerBound], as: UTF8.self).split(separator: ";").first ?? "", radix: 16) ?? 0
        if size == 0 { break }
        let start = line.upperBound
        guard rest.distance(from: start, to: rest.endIndex) >= size else { break }
        let stop = rest.index(start, offsetBy: size)
        out.append(rest[start..<stop])
        rest = rest[(rest.index(stop, offsetBy: 2, limitedBy: rest.endIndex) ?? rest.endIndex)...]
    }
    return out
}

private enum HTTPSessionHolder {
    // No cookies, no caching: every test says exactly what it sends.
    static let session: URLSession = {
        let config = URLSessionConfiguration.ephemeral
        config.httpCookieAcceptPolicy = .never
        config.httpShouldSetCookies = false
        config.requestCachePolicy = .reloadIgnoringLocalCacheData
        return URLSession(configuration: config)
    }()
}

/// A headless Chromium driven through chromedriver.
public final class Browser: @unchecked Sendable {
    static let elementKey = "element-6066-11e4-a52e-4f735466cecf"

    private let driver: SpawnedProcess
    private let driverPort: Int
    private let sessionID: String
    private var closed = false
    private let lock = NSLock()

    private init(driver: SpawnedProcess, driverPort: Int, sessionID: String) {
        self.driver = driver
        self.driverPort = driverPort
        self.sessionID = sessionID
    }

    /// The Chromium binary: `$CHROME_BIN`, else the usual install locations.
    static func chromiumPath() -> String? {
        let env = ProcessInfo.processInfo.environment
        let candidates = [env["CHROME_BIN"], "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome",
                          "/snap/bin/chromium"].compactMap { $0 }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// chromedriver: `$CHROMEDRIVER`, else the usual install locations.
    static func chromedriverPath() -> String? {
        let env = ProcessInfo.processInfo.environment
        let candidates = [env["CHROMEDRIVER"], "/usr/bin/chromedriver", "/usr/local/bin/chromedriver",
                          "/usr/lib/chromium/chromedriver"].compactMap { $0 }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Starts chromedriver on a free port and a headless Chromium session (window 1280x900, --no-sandbox,
    /// --disable-dev-shm-usage). Throws `BrowserUnavailable` when chromium/chromedriver aren't installed (tests skip),
    /// and `WebDriverError` when they are but don't start (tests fail: a broken harness must not pass as a skip).
    public static func launch() throws -> Browser {
        guard let chromium = chromiumPath() else {
            throw BrowserUnavailable("Chromium not found (/usr/bin/chromium or $CHROME_BIN); run scripts/install-deps.sh")
        }
        guard let chromedriver = chromedriverPath() else {
            throw BrowserUnavailable("chromedriver not found (/usr/bin/chromedriver or $CHROMEDRIVER); run scripts/install-deps.sh")
        }
        let port = freePort()
        let driver = SpawnedProcess()
        driver.executableURL = URL(fileURLWithPath: chromedriver)
        driver.arguments = ["--port=\(port)", "--allowed-ips=127.0.0.1"]
        driver.standardOutput = FileHandle.nullDevice
        driver.standardError = FileHandle.nullDevice
        do { try driver.run() } catch {
            throw WebDriverError(error: "chromedriver", message: "\(chromedriver) did not start: \(error)")
        }
        // Wait for /status to say ready.
        let deadline = Date().addingTimeInterval(30)
        var ready = false
        while Date() < deadline && driver.isRunning {
            if let r = try? socketHTTP("GET", port: port, path: "/status", timeout: 5), r.status == 200,
               let json = try? JSONSerialization.jsonObject(with: r.body) as? [String: Any],
               let value = json["value"] as? [String: Any], value["ready"] as? Bool == true {
                ready = true
                break
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        guard ready else {
            if driver.isRunning { driver.terminate(); driver.waitUntilExit() }
            throw WebDriverError(error: "chromedriver", message: "\(chromedriver) did not become ready on port \(port) within 30 s")
        }
        let capabilities: [String: Any] = [
            "capabilities": [
                "alwaysMatch": [
                    "browserName": "chrome",
                    // Leave alerts/confirms open for acceptAlert() instead of dismissing them.
                    "unhandledPromptBehavior": "ignore",
                    "goog:chromeOptions": [
                        "binary": chromium,
                        "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                                 "--window-size=1280,900", "--no-first-run", "--no-default-browser-check",
                                 "--disable-extensions", "--disable-background-networking"],
                    ] as [String: Any],
                ] as [String: Any],
            ],
        ]
        do {
            let value = try command(port, "POST", "/session", capabilities, timeout: 90)
            guard let dict = value as? [String: Any], let id = dict["sessionId"] as? String else {
                throw WebDriverError(error: "session not created", message: "unexpected answer: \(String(describing: value))")
            }
            let browser = Browser(driver: driver, driverPort: port, sessionID: id)
            // Generous page-load and script timeouts: CI machines are loaded.
            _ = try? browser.session("POST", "/timeouts", ["pageLoad": 60_000, "script": 60_000, "implicit": 0])
            return browser
        } catch {
            if driver.isRunning { driver.terminate(); driver.waitUntilExit() }
            throw WebDriverError(error: "session not created",
                                 message: "no headless Chromium session (\(chromium)) via chromedriver: \(error)")
        }
    }

    deinit { close() }

    // MARK: protocol

    /// One WebDriver command; returns the answer's `value`, throws the driver's error and message.
    static func command(_ port: Int, _ method: String, _ path: String, _ body: Any?, timeout: Double = 60) throws -> Any? {
        var data: Data? = nil
        if let body { data = try JSONSerialization.data(withJSONObject: body) }
        else if method == "POST" { data = Data("{}".utf8) }
        let r = try socketHTTP(method, port: port, path: path, body: data, timeout: timeout)
        let json = (try? JSONSerialization.jsonObject(with: r.body, options: [.fragmentsAllowed])) as? [String: Any]
        let value = json?["value"]
        if r.status >= 400 {
            let v = value as? [String: Any]
            throw WebDriverError(error: v?["error"] as? String ?? "HTTP \(r.status)",
                                 message: v?["message"] as? String ?? String(decoding: r.body, as: UTF8.self))
        }
        guard json != nil else {
            throw WebDriverError(error: "bad answer", message: "\(method) \(path): \(String(decoding: r.body, as: UTF8.self))")
        }
        return value is NSNull ? nil : value
    }

    @discardableResult
    func session(_ method: String, _ path: String, _ body: Any? = nil, timeout: Double = 90) throws -> Any? {
        try Self.command(driverPort, method, "/session/\(sessionID)" + path, body, timeout: timeout)
    }

    // MARK: navigation

    public func go(_ url: String) throws { try session("POST", "/url", ["url": url]) }

    public var currentURL: String {
        get throws { try session("GET", "/url") as? String ?? "" }
    }

    public var title: String {
        get throws { try session("GET", "/title") as? String ?? "" }
    }

    // MARK: elements

    private func findOnce(_ css: String) throws -> Element? {
        do {
            let v = try session("POST", "/element", ["using": "css selector", "value": css])
            guard let dict = v as? [String: Any], let id = dict[Self.elementKey] as? String else { return nil }
            return Element(browser: self, id: id)
        } catch let e as WebDriverError where e.error == "no such element" {
            return nil
        }
    }

    /// The first element matching `css`, polling until one is present (30 s by default: the browser shares a loaded
    /// 2-core CI machine with the rest of the suite).
    @discardableResult
    public func find(_ css: String, timeout: Double = 30) throws -> Element {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let e = try findOnce(css) { return e }
            if Date() >= deadline {
                let url = (try? currentURL) ?? "?"
                throw WebDriverError(error: "timeout", message: "no element matches '\(css)' after \(timeout) s (page \(url))")
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }

    /// Every element matching `css` now (no waiting).
    public func findAll(_ css: String) throws -> [Element] {
        let v = try session("POST", "/elements", ["using": "css selector", "value": css])
        return (v as? [[String: Any]] ?? []).compactMap { ($0[Self.elementKey] as? String).map { Element(browser: self, id: $0) } }
    }

    /// Polls until an element matching `css` has text containing `contains`; returns it.
    @discardableResult
    public func waitForText(_ css: String, contains: String, timeout: Double = 30) throws -> Element {
        let deadline = Date().addingTimeInterval(timeout)
        var seen: [String] = []
        while true {
            seen = []
            for e in (try? findAll(css)) ?? [] {
                // The element may go stale between finding and reading; just look again.
                guard let t = try? e.text else { continue }
                if t.contains(contains) { return e }
                seen.append(t)
            }
            if Date() >= deadline {
                let url = (try? currentURL) ?? "?"
                let shown = seen.isEmpty ? "no element matches" : "texts: \(seen.map { String($0.prefix(300)) })"
                throw WebDriverError(error: "timeout",
                                     message: "no '\(css)' contains \"\(contains)\" after \(timeout) s (page \(url)); \(shown)")
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }

    // MARK: scripts

    private func encodeArgs(_ args: [Any]) -> [Any] {
        args.map { a -> Any in
            if let e = a as? Element { return [Self.elementKey: e.id] }
            return a
        }
    }

    /// Runs `script` as a function body (`arguments[i]` are `args`) and returns what it returns (JSON values;
    /// elements come back as `Element`).
    @discardableResult
    public func execute(_ script: String, _ args: [Any] = []) throws -> Any? {
        decodeResult(try session("POST", "/execute/sync", ["script": script, "args": encodeArgs(args)]))
    }

    /// Runs `script` with a callback as its last argument (`arguments[arguments.length - 1]`) and returns the
    /// value passed to it. The script timeout is 60 s.
    @discardableResult
    public func executeAsync(_ script: String, _ args: [Any] = []) throws -> Any? {
        decodeResult(try session("POST", "/execute/async", ["script": script, "args": encodeArgs(args)]))
    }

    private func decodeResult(_ v: Any?) -> Any? {
        if let dict = v as? [String: Any] {
            if dict.count == 1, let id = dict[Self.elementKey] as? String { return Element(browser: self, id: id) }
            return dict.mapValues { decodeResult($0) ?? NSNull() }
        }
        if let list = v as? [Any] { return list.map { decodeResult($0) ?? NSNull() } }
        return v is NSNull ? nil : v
    }

    // MARK: dialogs

    /// Accepts the open alert / confirm (e.g. `window.confirm`), waiting up to 15 s for one to appear.
    public func acceptAlert() throws {
        let deadline = Date().addingTimeInterval(15)
        while true {
            do {
                try session("POST", "/alert/accept")
                return
            } catch let e as WebDriverError where e.error == "no such alert" && Date() < deadline {
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
    }

    /// The open alert's text, if any.
    public func alertText() throws -> String? {
        do { return try session("GET", "/alert/text") as? String } catch let e as WebDriverError where e.error == "no such alert" {
            return nil
        }
    }

    // MARK: screenshots

    /// Where screenshots go: `$SETTEE_TEST_ARTIFACTS`, else `.build/test-artifacts/browser` under the package.
    public static var artifactsDirectory: String {
        if let dir = ProcessInfo.processInfo.environment["SETTEE_TEST_ARTIFACTS"], !dir.isEmpty { return dir }
        // Tests/SetteeTestSupport/WebDriver.swift → the package root.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".build/test-artifacts/browser").path
    }

    /// Saves a PNG of the viewport as `NAME.png` in `artifactsDirectory`; returns its path.
    @discardableResult
    public func screenshot(_ name: String) throws -> String {
        guard let b64 = try session("GET", "/screenshot") as? String, let png = Data(base64Encoded: b64) else {
            throw WebDriverError(error: "screenshot", message: "the driver returned no image")
        }
        let dir = Self.artifactsDirectory
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let safe = String(name.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." ? $0 : "_" })
        let path = (dir as NSString).appendingPathComponent(safe + ".png")
        try png.write(to: URL(fileURLWithPath: path))
        return path
    }

    // MARK: teardown

    /// Deletes the session (Chromium exits) and terminates chromedriver. Safe to call twice.
    public func close() {
        lock.lock()
        let already = closed
        closed = true
        lock.unlock()
        if already { return }
        _ = try? Self.command(driverPort, "DELETE", "/session/\(sessionID)", nil, timeout: 30)
        if driver.isRunning {
            driver.terminate()
            driver.waitUntilExit()
        }
    }
}

/// An element in the page (a W3C web element reference).
public struct Element: Sendable {
    let browser: Browser
    public let id: String

    init(browser: Browser, id: String) {
        self.browser = browser
        self.id = id
    }

    public func click() throws { try browser.session("POST", "/element/\(id)/click") }

    /// Sends keys to the element (appends to what it holds).
    public func type(_ text: String) throws { try browser.session("POST", "/element/\(id)/value", ["text": text]) }

    public func clear() throws { try browser.session("POST", "/element/\(id)/clear") }

    /// The rendered text.
    public var text: String {
        get throws { try browser.session("GET", "/element/\(id)/text") as? String ?? "" }
    }

    public func attribute(_ name: String) throws -> String? {
        try browser.session("GET", "/element/\(id)/attribute/\(name)").map { stringValue($0) }
    }

    /// A DOM property, e.g. `value` or `checked`, as a string.
    public func property(_ name: String) throws -> String? {
        try browser.session("GET", "/element/\(id)/property/\(name)").map { stringValue($0) }
    }

    private func stringValue(_ v: Any) -> String {
        if let s = v as? String { return s }
        if let n = v as? NSNumber {
            // JSONSerialization gives NSNumber for booleans too.
            if String(cString: n.objCType) == "c" { return n.boolValue ? "true" : "false" }
            return n.stringValue
        }
        return String(describing: v)
    }
}
