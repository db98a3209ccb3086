package import SetteeCore

/// Why a JavaScript design function gave no result.
package enum JavaScriptError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The function's source doesn't compile (CouchDB's `compilation_error`).
    case compilation(String)
    /// The function threw: `name` and `reason` as the query server reports them (`["error", name, reason]`), e.g.
    /// `render_error`, `TypeError`, or an object thrown as `{error, reason}`.
    case thrown(name: String, reason: String)
    /// `throw({forbidden: …})` (validate_doc_update, update functions): 403.
    case forbidden(String)
    /// `throw({unauthorized: …})`: 401.
    case unauthorized(String)
    /// `throw({not_found: …})` (show, list, update functions): 404.
    case notFound(String)
    /// The call ran past the configured time limit (`[couchdb] os_process_timeout`); the process was killed.
    case timeout
    /// The process died or answered nonsense; it was killed and will be replaced.
    case crashed(String)
    case protocolError(String)
    /// No query server could be started (the executable is missing).
    case unavailable(String)

    public var description: String {
        switch self {
        case .compilation(let r): return "compilation_error: \(r)"
        case .thrown(let name, let reason): return "\(name): \(reason)"
        case .forbidden(let r): return "forbidden: \(r)"
        case .unauthorized(let r): return "unauthorized: \(r)"
        case .notFound(let r): return "not_found: \(r)"
        case .timeout: return "os_process_error: the JavaScript function ran past the time limit"
        case .crashed(let r): return "os_process_error: \(r)"
        case .protocolError(let r): return "os_process_error: \(r)"
        case .unavailable(let r): return "os_process_error: \(r)"
        }
    }

    /// The error an answer such as `["error", "compilation_error", "…"]` or `{"forbidden": "…"}` stands for; nil
    /// when it isn't one.
    public static func from(answer: JSON) -> JavaScriptError? {
        switch answer {
        case .array(let items) where items.count >= 2 && items[0] == .string("error"):
            let name = items[1].stringValue ?? String(decoding: items[1].serializedBytes, as: UTF8.self)
            let reason = items.count > 2 ? (items[2].stringValue ?? String(decoding: items[2].serializedBytes, as: UTF8.self)) : ""
            switch name {
            case "compilation_error": return .compilation(reason)
            case "timeout": return .timeout
            case "out_of_memory": return .crashed("out of memory: \(reason)")
            case "forbidden": return .forbidden(reason)
            case "unauthorized": return .unauthorized(reason)
            case "not_found": return .notFound(reason)
            default: return .thrown(name: name, reason: reason)
            }
        case .object(let o):
            if let r = o["forbidden"] { return .forbidden(r.stringValue ?? String(decoding: r.serializedBytes, as: UTF8.self)) }
            if let r = o["unauthorized"] { return .unauthorized(r.stringValue ?? String(decoding: r.serializedBytes, as: UTF8.self)) }
            if let e = o["error"], o.count <= 2 {
                let name = e.stringValue ?? String(decoding: e.serializedBytes, as: UTF8.self)
                let reason = o["reason"].map { $0.stringValue ?? String(decoding: $0.serializedBytes, as: UTF8.self) } ?? ""
                if name == "not_found" { return .notFound(reason) }
                return .thrown(name: name, reason: reason)
            }
            return nil
        default:
            return nil
        }
    }
}
