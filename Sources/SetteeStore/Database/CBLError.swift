public import Foundation
public import SetteeCore

/// Couchbase Lite's error codes (`CBLError`), so code written against Couchbase Lite can test a thrown error's
/// `code` as it did: every ``SetteeError`` is an `NSError` in ``domain`` with one of these codes.
///
/// ```swift
/// do { try collection.setDocumentExpiration(id: "missing", expiration: nil) }
/// catch let error as NSError where error.code == CBLError.notFound { … }
/// ```
public enum CBLError {
    public static let domain = "CouchbaseLite"

    public static let assertionFailed = 1
    public static let unimplemented = 2
    public static let unsupportedEncryption = 3
    public static let badRevisionID = 4
    public static let corruptRevisionData = 5
    public static let notOpen = 6
    public static let notFound = 7
    public static let conflict = 8
    public static let invalidParameter = 9
    public static let unexpectedError = 10
    public static let cantOpenFile = 11
    public static let ioError = 12
    public static let memoryError = 13
    public static let notWriteable = 14
    public static let corruptData = 15
    public static let busy = 16
    public static let notInTransaction = 17
    public static let transactionNotClosed = 18
    public static let unsupported = 19
    public static let unreadableDatabase = 20
    public static let wrongFormat = 21
    public static let crypto = 22
    public static let invalidQuery = 23
    public static let missingIndex = 24
    public static let invalidQueryParam = 25
    public static let remoteError = 26
    public static let databaseTooOld = 27
    public static let databaseTooNew = 28
    public static let badDocID = 29
    public static let cantUpgradeDatabase = 30

    public static let networkBase = 5000
    public static let dnsFailure = 5001
    public static let unknownHost = 5002
    public static let timeout = 5003
    public static let invalidURL = 5004
    public static let tooManyRedirects = 5005
    public static let tlsHandshakeFailed = 5006
    public static let tlsCertExpired = 5007
    public static let tlsCertUntrusted = 5008
    public static let tlsClientCertRequired = 5009
    public static let tlsClientCertRejected = 5010
    public static let tlsCertUnknownRoot = 5011
    public static let invalidRedirect = 5012
    public static let unknownInterface = 5027

    /// HTTP statuses are `httpBase` + the status.
    public static let httpBase = 10000
    public static let httpAuthRequired = 10401
    public static let httpForbidden = 10403
    public static let httpNotFound = 10404
    public static let httpProxyAuthRequired = 10407
    public static let httpConflict = 10409
    public static let httpEntityTooLarge = 10413
    public static let httpImATeapot = 10418
    public static let httpInternalServerError = 10500
    public static let httpNotImplemented = 10501
    public static let httpServiceUnavailable = 10503

    // WebSocket close codes (Couchbase Lite's replication protocol runs over WebSockets; Settee's over HTTP
    // requests, so its errors never carry these, but code that switches on them compiles).
    public static let webSocketBase = 11000
    public static let webSocketGoingAway = 11001
    public static let webSocketProtocolError = 11002
    public static let webSocketDataError = 11003
    public static let webSocketAbnormalClose = 11006
    public static let webSocketBadMessageFormat = 11007
    public static let webSocketPolicyError = 11008
    public static let webSocketMessageTooBig = 11009
    public static let webSocketMissingExtension = 11010
    public static let webSocketCantFulfill = 11011
    public static let webSocketCloseUserTransient = 14001
    public static let webSocketCloseUserPermanent = 14002

    public static let invalidJSON = 17001
    public static let decodingError = 18001
    public static let encodingError = 18002
}

extension SetteeError: CustomNSError {
    public static var errorDomain: String { CBLError.domain }

    /// The Couchbase Lite code of the error's kind.
    public var errorCode: Int {
        switch code {
        case .notFound, .deleted: CBLError.notFound
        case .conflict: CBLError.conflict
        case .badDocID: CBLError.badDocID
        case .invalidJSON: CBLError.invalidJSON
        case .unauthorized: CBLError.httpAuthRequired
        case .forbidden: CBLError.httpForbidden
        case .closed: CBLError.notOpen
        case .storage: CBLError.ioError
        case .queryParseError: CBLError.invalidQuery
        case .timeout: CBLError.timeout
        case .internalError: CBLError.unexpectedError
        case .tooLarge: CBLError.httpEntityTooLarge
        default: CBLError.invalidParameter
        }
    }

    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: reason] }
}
