import Crypto
import Foundation
import JWTKit
import SetteeCore

/// JWT bearer authentication (`Authorization: Bearer <token>`), as CouchDB's `jwt_authentication_handler`:
/// the signature is checked with a configured HMAC secret (HS256/384/512) or RSA public key (RS256/384/512),
/// `exp`/`nbf` are enforced, `aud`/`iss` when configured, `sub` becomes the user name and the roles claim the roles.
/// The token's `alg` picks the key family, so an RSA public key can never be used as an HMAC secret.
final class JWTAuthenticator: Sendable {
    let configuration: JWTConfiguration
    private let rsaPublicKeys: [JWTKit.Insecure.RSA.PublicKey]
    private let ecPublicKeys: [ECKey]

    /// An ES256/384/512 verification key.
    enum ECKey: Sendable {
        case p256(P256.Signing.PublicKey), p384(P384.Signing.PublicKey), p521(P521.Signing.PublicKey)

        /// Whether `signature` signs `message` under this key with `alg`'s hash. As CouchDB (jwtf), the hash comes
        /// from the algorithm and the curve from the key: a P-256 key verifies ES384 and ES512 tokens too (the
        /// digest is truncated to the curve's size, as ECDSA does), whose r and s are padded to the hash's size.
        func verifies(_ signature: [UInt8], of message: [UInt8], alg: String) -> Bool {
            let hashSize: Int
            switch alg {
            case "ES256": hashSize = 32
            case "ES384": hashSize = 48
            case "ES512": hashSize = 64
            default: return false
            }
            func digest<H: HashFunction>(_: H.Type) -> H.Digest { H.hash(data: message) }
            func verify<D: Digest>(_ d: D) -> Bool {
                switch self {
                case .p256(let k):
                    if let raw = Self.fit(signature, to: 32),
                       let s = try? P256.Signing.ECDSASignature(rawRepresentation: raw), k.isValidSignature(s, for: d) { return true }
                    if let s = try? P256.Signing.ECDSASignature(derRepresentation: signature) { return k.isValidSignature(s, for: d) }
                case .p384(let k):
                    if let raw = Self.fit(signature, to: 48),
                       let s = try? P384.Signing.ECDSASignature(rawRepresentation: raw), k.isValidSignature(s, for: d) { return true }
                    if let s = try? P384.Signing.ECDSASignature(derRepresentation: signature) { return k.isValidSignature(s, for: d) }
                case .p521(let k):
                    if let raw = Self.fit(signature, to: 66),
                       let s = try? P521.Signing.ECDSASignature(rawRepresentation: raw), k.isValidSignature(s, for: d) { return true }
                    if let s = try? P521.Signing.ECDSASignature(derRepresentation: signature) { return k.isValidSignature(s, for: d) }
                }
                return false
            }
            switch hashSize {
            case 32: return verify(digest(SHA256.self))
            case 48: return verify(digest(SHA384.self))
            default: return verify(digest(SHA512.self))
            }
        }

        /// A raw JWS signature (r‖s, two halves of equal size: the curve's, the hash's, or as jwtf pads them, the
        /// algorithm's bits) as r‖s of `to` bytes each: leading zero bytes dropped or added. nil when a number
        /// doesn't fit the curve.
        static func fit(_ signature: [UInt8], to: Int) -> [UInt8]? {
            guard !signature.isEmpty, signature.count % 2 == 0 else { return nil }
            let half = signature.count / 2
            var out: [UInt8] = []
            out.reserveCapacity(2 * to)
            for part in [signature[0..<half], signature[half...]] {
                var bytes = part.drop(while: { $0 == 0 })
                if bytes.count > to { return nil }
                out.append(contentsOf: repeatElement(0, count: to - bytes.count))
                out.append(contentsOf: bytes)
                bytes = []
            }
            return out
        }
    }

    /// HS256/384/512: the HMAC of the signing input under any configured secret (any length, as CouchDB).
    private func hmacVerifies(_ signature: [UInt8], of message: [UInt8], alg: String) -> Bool {
        configuration.hmacSecrets.contains { secret in
            let key = SymmetricKey(data: secret)
            let mac: [UInt8]
            switch alg {
            case "HS256": mac = Array(HMAC<SHA256>.authenticationCode(for: message, using: key))
            case "HS384": mac = Array(HMAC<SHA384>.authenticationCode(for: message, using: key))
            default: mac = Array(HMAC<SHA512>.authenticationCode(for: message, using: key))
            }
            return Passwords.constantTimeEquals(mac, signature)
        }
    }
    private let keys = KeyCollections()

    /// Validates the configured keys (a bad PEM fails here, at start).
    init(_ configuration: JWTConfiguration) throws {
        self.configuration = configuration
        rsaPublicKeys = try configuration.rsaPublicKeysPEM.enumerated().map { i, pem in
            do { return try JWTKit.Insecure.RSA.PublicKey(pem: pem) } catch {
                throw SetteeError(.badRequest, "JWT RSA public key \(i + 1) is not a usable PEM public key: \(error)")
            }
        }
        ecPublicKeys = try configuration.ecPublicKeysPEM.enumerated().map { i, pem in
            if let key = try? P256.Signing.PublicKey(pemRepresentation: pem) { return .p256(key) }
            if let key = try? P384.Signing.PublicKey(pemRepresentation: pem) { return .p384(key) }
            if let key = try? P521.Signing.PublicKey(pemRepresentation: pem) { return .p521(key) }
            throw SetteeError(.badRequest, "JWT EC public key \(i + 1) is not a usable PEM P-256, P-384 or P-521 public key")
        }
        if configuration.hmacSecrets.contains(where: { $0.isEmpty }) {
            throw SetteeError(.badRequest, "JWT HMAC secrets must not be empty")
        }
        if configuration.hmacSecrets.isEmpty && rsaPublicKeys.isEmpty && ecPublicKeys.isEmpty {
            throw SetteeError(.badRequest, "JWT authentication needs at least one HMAC secret, RSA or EC public key")
        }
    }

    /// jwt-kit's key collections (actors, so built on first use).
    private actor KeyCollections {
        private var built: (hmac: JWTKeyCollection?, rsa: JWTKeyCollection?)?

        func get(secrets: [[UInt8]], rsa: [JWTKit.Insecure.RSA.PublicKey]) async -> (hmac: JWTKeyCollection?, rsa: JWTKeyCollection?) {
            if let built { return built }
            var hmacKeys: JWTKeyCollection?
            if !secrets.isEmpty {
                let keys = JWTKeyCollection()
                for (i, secret) in secrets.enumerated() {
                    // HMAC keys must be at least as long as the digest (jwt-kit asserts it).
                    for (alg, digest, size) in [("HS256", DigestAlgorithm.sha256, 32), ("HS384", .sha384, 48), ("HS512", .sha512, 64)]
                    where secret.count >= size {
                        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: digest, kid: JWKIdentifier(string: "\(alg)-\(i)"))
                    }
                }
                hmacKeys = keys
            }
            var rsaKeys: JWTKeyCollection?
            if !rsa.isEmpty {
                let keys = JWTKeyCollection()
                for (i, key) in rsa.enumerated() {
                    for (alg, digest) in [("RS256", DigestAlgorithm.sha256), ("RS384", .sha384), ("RS512", .sha512)] {
                        await keys.add(rsa: key, digestAlgorithm: digest, kid: JWKIdentifier(string: "\(alg)-\(i)"))
                    }
                }
                rsaKeys = keys
            }
            built = (hmacKeys, rsaKeys)
            return (hmacKeys, rsaKeys)
        }
    }

    /// The registered claims jwt-kit checks for us.
    struct Claims: JWTPayload {
        var sub: SubjectClaim?
        var exp: ExpirationClaim?
        var nbf: NotBeforeClaim?
        var aud: AudienceClaim?
        var iss: IssuerClaim?

        /// Time claims are checked by ``JWTAuthenticator`` itself (so an expired token is reported as expired, not
        /// as a signature mismatch while jwt-kit tries each key).
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    enum Failure: Error, CustomStringConvertible {
        case malformed, unsupportedAlgorithm(String), badSignature, expired, missingClaim(String), audience, issuer

        var description: String {
            switch self {
            case .malformed: return "malformed token"
            case .unsupportedAlgorithm(let a): return "no key configured for algorithm \(a)"
            case .badSignature: return "signature verification failed"
            case .expired: return "token expired or not yet valid"
            case .missingClaim(let c): return "token lacks the required claim \(c)"
            case .audience: return "token audience does not include this node"
            case .issuer: return "token issuer is not accepted"
            }
        }
    }

    /// Verifies a token and returns the caller it names.
    func authenticate(_ token: String) async throws(Failure) -> UserContext {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard token.utf8.count <= 16_384, parts.count == 3,
              let headerBytes = Base64.urlDecode(String(parts[0])),
              case .object(let header)? = try? JSON.parse(headerBytes),
              let payloadBytes = Base64.urlDecode(String(parts[1])),
              case .object(let payload)? = try? JSON.parse(payloadBytes),
              let alg = header["alg"]?.stringValue
        else { throw .malformed }
        if !configuration.allowedAlgorithms.isEmpty && !configuration.allowedAlgorithms.contains(alg) {
            throw .unsupportedAlgorithm(alg)
        }
        for claim in ["sub"] + configuration.requiredClaims where payload[claim] == nil {
            throw .missingClaim(claim)
        }
        for (claim, value) in configuration.requiredClaimValues where payload[claim]?.stringValue != value {
            throw .missingClaim("\(claim) = \(value)")
        }
        let signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard let signature = Base64.urlDecode(String(parts[2])) else { throw .malformed }
        switch alg {
        case "HS256", "HS384", "HS512":
            guard !configuration.hmacSecrets.isEmpty else { throw .unsupportedAlgorithm(alg) }
            guard hmacVerifies(signature, of: signingInput, alg: alg) else { throw .badSignature }
        case "ES256", "ES384", "ES512":
            guard !ecPublicKeys.isEmpty else { throw .unsupportedAlgorithm(alg) }
            guard ecPublicKeys.contains(where: { $0.verifies(signature, of: signingInput, alg: alg) }) else { throw .badSignature }
        case "RS256", "RS384", "RS512":
            let collections = await self.keys.get(secrets: [], rsa: rsaPublicKeys)
            guard let keys = collections.rsa else { throw .unsupportedAlgorithm(alg) }
            do { _ = try await keys.verify(token, as: Claims.self, iteratingKeys: true) } catch { throw .badSignature }
        default:
            throw .unsupportedAlgorithm(alg)
        }
        let now = Date().timeIntervalSince1970
        let leeway = 60.0
        if let exp = payload["exp"] {
            guard let t = exp.doubleValue, now < t + leeway else { throw .expired }
        }
        if let nbf = payload["nbf"] {
            guard let t = nbf.doubleValue, now + leeway >= t else { throw .expired }
        }
        if let audience = configuration.audience {
            let aud = payload["aud"]?.arrayValue?.compactMap(\.stringValue) ?? payload["aud"]?.stringValue.map { [$0] } ?? []
            guard aud.contains(audience) else { throw .audience }
        }
        if let issuer = configuration.issuer {
            guard payload["iss"]?.stringValue == issuer else { throw .issuer }
        }
        guard let sub = payload["sub"]?.stringValue, !sub.isEmpty else { throw .missingClaim("sub") }
        return UserContext(name: sub, roles: roles(in: payload), method: "jwt")
    }

    /// The roles claim: a top-level member named exactly as configured, else a dotted path.
    func roles(in payload: JSONObject) -> [String] {
        var value: JSON? = payload[configuration.rolesClaim]
        if value == nil {
            var current: JSON? = .object(payload)
            for part in configuration.rolesClaim.split(separator: ".") { current = current?[String(part)] }
            value = current
        }
        // `_admin` from a token is honoured: the identity provider is trusted as configured.
        return value?.arrayValue?.compactMap(\.stringValue) ?? []
    }
}
