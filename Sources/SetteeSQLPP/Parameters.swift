public import SetteeCore
import Synchronization

/// Values for a query's `$name` parameters (Couchbase Lite's `Parameters`).
///
/// ```swift
/// let query = try db.createQuery("SELECT name FROM _ WHERE type = $type")
/// query.parameters = Parameters().setString("hotel", forName: "type")
/// ```
///
/// Thread-safe: the values are held in a mutex, so a query may read them while another thread sets them.
public final class Parameters: Sendable {
    private let state: Mutex<[String: JSON]>
    /// Every parameter set, by name.
    public var values: [String: JSON] { state.withLock { $0 } }

    public init(_ values: [String: JSON] = [:]) { state = Mutex(values) }

    /// A parameter's value, or nil when it is not set.
    public func value(forName name: String) -> JSON? { state.withLock { $0[name] } }

    @discardableResult public func setValue(_ value: JSON?, forName name: String) -> Parameters {
        state.withLock { $0[name] = value ?? .null }
        return self
    }
    @discardableResult public func setString(_ value: String?, forName name: String) -> Parameters {
        setValue(value.map(JSON.string), forName: name)
    }
    @discardableResult public func setInt(_ value: Int, forName name: String) -> Parameters {
        setValue(.int(Int64(value)), forName: name)
    }
    @discardableResult public func setInt64(_ value: Int64, forName name: String) -> Parameters {
        setValue(.int(value), forName: name)
    }
    @discardableResult public func setDouble(_ value: Double, forName name: String) -> Parameters {
        setValue(.double(value), forName: name)
    }
    @discardableResult public func setFloat(_ value: Float, forName name: String) -> Parameters {
        setValue(.double(Double(value)), forName: name)
    }
    @discardableResult public func setBoolean(_ value: Bool, forName name: String) -> Parameters {
        setValue(.bool(value), forName: name)
    }
    @_disfavoredOverload @discardableResult public func setArray(_ value: [JSON]?, forName name: String) -> Parameters {
        setValue(value.map(JSON.array), forName: name)
    }
    @_disfavoredOverload @discardableResult public func setDictionary(_ value: JSONObject?, forName name: String) -> Parameters {
        setValue(value.map(JSON.object), forName: name)
    }
}
