import Foundation
import JWTKit
import SetteeCore

/// JWT bearer authentication (`Authorization: Bearer <token>`), as CouchDB's `jwt_authentication_handler`:
/// the signature is checked with a configured HMAC secret (HS256/384/512) or RSA public key (RS256/384/512),
/// `exp`/`nbf` are enforced, `aud`/`iss` when configured, `sub` becomes the user name and the roles claim the roles.
/// The token's `alg` picks the key family, so an RSA public key can never be used as an HMAC secret.
final class JWTAuthenticator: Sendable {
    let configuration: JWTConfiguration
    private let rsaPublicKeys: [Insecure.RSA.PublicKey]
    private let keys = KeyCollections()

    /// Validates the configured keys (a bad PEM fails here, at start).
    init(_ configuration: JWTConfiguration) throws {
        self.configuration = configuration
        rsaPublicKeys = try configuration.rsaPublicKeysPEM.enumerated().map { i, pem in
            do { return try Insecure.RSA.PublicKey(pem: pem) } catch {
                throw SetteeError(.badRequest, "JWT RSA public key \(i + 1) is not a usable PEM public key: \(error)")
            }
        }
        if configuration.hmacSecrets.contains(where: { $0.count < 32 }) {
            throw SetteeError(.badRequest, "JWT HMAC secrets must be at least 32 bytes")
        }
        if configuration.hmacSecrets.isEmpty && rsaPublicKeys.isEmpty {
            throw SetteeError(.badRequest, "JWT authentication needs at least one HMAC secret or RSA public key")
        }
    }

    /// jwt-kit's key collections (actors, so built on first use).
    private actor KeyCollections {
        private var built: (hmac: JWTKeyCollection?, rsa: JWTKeyCollection?)?

        func get(secrets: [[UInt8]], rsa: [Insecure.RSA.PublicKey]) async -> (hmac: JWTKeyCollection?, rsa: JWTKeyCollection?) {
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
        let collections = await self.keys.get(secrets: configuration.hmacSecrets, rsa: rsaPublicKeys)
        let keys: JWTKeyCollection
        switch alg {
        case "HS256", "HS384", "HS512": guard let k = collections.hmac else { throw .unsupportedAlgorithm(alg) }; keys = k
        case "RS256", "RS384", "RS512": guard let k = collections.rsa else { throw .unsupportedAlgorithm(alg) }; keys = k
        default: throw .unsupportedAlgorithm(alg)
        }
        for claim in ["sub"] + configuration.requiredClaims where payload[claim] == nil {
            throw .missingClaim(claim)
        }
        let claims: Claims
        do {
            claims = try await keys.verify(token, as: Claims.self, iteratingKeys: true)
        } catch {
            throw .badSignature
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
            guard let aud = claims.aud, aud.value.contains(audience) else { throw .audience }
        }
        if let issuer = configuration.issuer {
            guard claims.iss?.value == issuer else { throw .issuer }
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
