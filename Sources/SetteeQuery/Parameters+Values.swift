public import Foundation
import SetteeCore
public import SetteeSQLPP
public import SetteeStore

/// Couchbase Lite's setters for every value type a parameter can take.
extension Parameters {
    /// A copy of `parameters` (empty for nil), to change without touching a query's own.
    public convenience init(parameters: Parameters?) { self.init(parameters?.values ?? [:]) }

    /// Sets a parameter from a Swift value (types as `MutableDictionaryObject.setValue(_:forKey:)`; nil is null).
    @discardableResult public func setValue(_ value: Any?, forName name: String) -> Parameters {
        setValue(DocumentValue.json(value) as JSON?, forName: name)
    }
    @discardableResult public func setNumber(_ value: NSNumber?, forName name: String) -> Parameters {
        setValue(value as Any?, forName: name)
    }
    /// Sets a date, as the ISO-8601 text documents store dates as.
    @discardableResult public func setDate(_ value: Date?, forName name: String) -> Parameters {
        setValue(value as Any?, forName: name)
    }
    /// Sets a blob's metadata (what a document stores for it).
    @discardableResult public func setBlob(_ value: Blob?, forName name: String) -> Parameters {
        setValue(value as Any?, forName: name)
    }
    @discardableResult public func setArray(_ value: ArrayObject?, forName name: String) -> Parameters {
        setValue(value as Any?, forName: name)
    }
    @discardableResult public func setDictionary(_ value: DictionaryObject?, forName name: String) -> Parameters {
        setValue(value as Any?, forName: name)
    }
}
