import AsyncHTTPClient
import Synchronization

/// Per-endpoint mutable state: the session cookie and whether the peer lacks `_bulk_get`.
final class SessionCookie: Sendable {
    private let state = Mutex<(cookie: String?, lacksBulkGet: Bool)>((nil, false))

    var cookie: String? {
        get { state.withLock { $0.cookie } }
        set { state.withLock { $0.cookie = newValue } }
    }

    var lacksBulkGet: Bool {
        get { state.withLock { $0.lacksBulkGet } }
        set { state.withLock { $0.lacksBulkGet = newValue } }
    }
}

/// The process-wide HTTP clients that trust a CA bundle, one per path.
final class CAClients: Sendable {
    private let clients = Mutex<[String: HTTPClient]>([:])

    func client(for path: String, make: () throws -> HTTPClient) throws -> HTTPClient {
        try clients.withLock { clients in
            if let existing = clients[path] { return existing }
            let client = try make()
            clients[path] = client
            return client
        }
    }
}
