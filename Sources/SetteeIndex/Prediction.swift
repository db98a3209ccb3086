import Foundation
public import SetteeCore
package import SetteeSQLPP
public import SetteeStore

/// A machine-learning model queries and indexes can call with `PREDICTION(name, input)` (Couchbase Lite's
/// `PredictiveModel`).
///
/// ```swift
/// final class ColorModel: PredictiveModel {
///     func predict(input: DictionaryObject) -> DictionaryObject? {
///         guard let color = input.string(forKey: "colorInput") else { return nil }
///         return MutableDictionaryObject().setValue(embed(color), forKey: "vector")
///     }
/// }
/// Database.prediction.registerModel(ColorModel(), withName: "ColorModel")
/// ```
/// `predict` may be called from several threads at once (queries and the index manager's background catch-up),
/// as in Couchbase Lite. Returning nil makes the PREDICTION call MISSING (an index then skips the document).
public protocol PredictiveModel {
    /// The model's output for `input`, or nil when it has none.
    func predict(input: DictionaryObject) -> DictionaryObject?
}

/// The registry of predictive models (Couchbase Lite's `Prediction`, reached as ``SetteeStore/Database/prediction``).
// @unchecked: `models` is guarded by `lock`; the models are apps' objects (not Sendable in Couchbase Lite's API),
// called from the threads that evaluate queries and index documents, as Couchbase Lite calls them.
public final class Prediction: @unchecked Sendable {
    private let lock = NSLock()
    private var models: [String: any PredictiveModel] = [:]

    init() {}

    /// Registers `model` under `name`, replacing any model of that name.
    public func registerModel(_ model: any PredictiveModel, withName name: String) {
        lock.withLock { models[name] = model }
    }

    /// Removes the model registered under `name` (nothing happens when there is none).
    public func unregisterModel(withName name: String) {
        lock.withLock { models[name] = nil }
    }

    /// The model registered under `name`.
    public func model(named name: String) -> (any PredictiveModel)? {
        lock.withLock { models[name] }
    }

    /// Runs the model `name` on `input` for `PREDICTION(name, input)`.
    ///
    /// - Throws: `queryParseError` when no model of that name is registered.
    public func predict(model name: String, input: JSON) throws(SetteeError) -> JSON? {
        guard let model = model(named: name) else {
            throw SetteeError(.queryParseError, "PREDICTION(\(name), …): no predictive model named \(name) is registered")
        }
        guard case .object(let object) = input else { return nil }
        return model.predict(input: DictionaryObject(object, database: nil)).map { .object($0.jsonObject) }
    }

    /// The evaluator hook that calls this registry.
    package var predictor: PredictionFunction.Predictor {
        { [self] name, input throws(SetteeError) in try self.predict(model: name, input: input) }
    }
}

extension Database {
    /// The process-wide registry of predictive models (Couchbase Lite's `Database.prediction`).
    public static let prediction = Prediction()
}
