import Foundation
import SetteeCore
import SetteeSQLPP
import SetteeStore

/// A machine-learning model queries and indexes can call with `PREDICTION(name, input)` (Couchbase Lite's
/// `PredictiveModel`).
///
/// ```swift
/// final class ColorModel: PredictiveModel {
///     func predict(input: JSONObject) -> JSONObject? {
///         guard let color = input["colorInput"]?.stringValue else { return nil }
///         return ["vector": .array(embed(color).map { .double(Double($0)) })]
///     }
/// }
/// Database.prediction.registerModel(ColorModel(), withName: "ColorModel")
/// ```
/// `predict` may be called from several threads at once (queries and the index manager's background catch-up).
/// Returning nil makes the PREDICTION call MISSING (an index then skips the document).
public protocol PredictiveModel: Sendable {
    /// The model's output for `input`, or nil when it has none.
    func predict(input: JSONObject) -> JSONObject?
}

/// The registry of predictive models (Couchbase Lite's `Prediction`, reached as ``SetteeStore/Database/prediction``).
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
        return model.predict(input: object).map(JSON.object)
    }

    /// The evaluator hook that calls this registry.
    public var predictor: PredictionFunction.Predictor {
        { [self] name, input throws(SetteeError) in try self.predict(model: name, input: input) }
    }
}

extension Database {
    /// The process-wide registry of predictive models (Couchbase Lite's `Database.prediction`).
    public static let prediction = Prediction()
}
