import Crypto
public import Foundation
import SetteeCore
import SwiftASN1
import X509

/// The certificate and private key a ``URLEndpointListener`` serves TLS with (Couchbase Lite's `TLSIdentity`, as
/// PEM files rather than keychain items).
public struct TLSIdentity: Sendable {
    /// The PEM certificate (chain) file.
    public let certificatePath: String
    /// The PEM private key file.
    public let keyPath: String
    /// When the (first) certificate stops being valid.
    public let expiration: Date

    /// An identity from existing PEM files (a certificate from your CA, say).
    /// - Throws: ``SetteeError`` `.badRequest` when the certificate file can't be read or holds no PEM certificate.
    public init(certificatePath: String, keyPath: String) throws {
        let pem: String
        do {
            pem = try String(contentsOfFile: certificatePath, encoding: .utf8)
        } catch {
            throw SetteeError(.badRequest, "TLS certificate \(certificatePath) can't be read: \(error)")
        }
        guard let first = pem.range(of: "-----BEGIN CERTIFICATE-----"),
              let end = pem.range(of: "-----END CERTIFICATE-----", range: first.upperBound..<pem.endIndex),
              let certificate = try? Certificate(pemEncoded: String(pem[first.lowerBound..<end.upperBound])) else {
            throw SetteeError(.badRequest, "TLS certificate \(certificatePath) holds no PEM certificate")
        }
        self.init(certificatePath: certificatePath, keyPath: keyPath, expiration: certificate.notValidAfter)
    }

    private init(certificatePath: String, keyPath: String, expiration: Date) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
        self.expiration = expiration
    }

    /// Makes a self-signed identity (P-256) and writes it to `directory` as `<label>.crt` and `<label>.key`
    /// (Couchbase Lite's `createIdentity(forServer:attributes:expiration:label:)`). The certificate names
    /// `commonName`, `localhost` and the loopback addresses, plus `hosts`; a peer trusts it by pinning the `.crt`
    /// file (`ReplicatorConfiguration.trustedRootCertificatesPath`). `forServer: false` makes a client identity
    /// (for `ClientCertificateAuthenticator`), whose certificate a `ListenerCertificateAuthenticator` trusts.
    /// - Throws: ``SetteeError`` `.storage` when the files cannot be written.
    public static func createIdentity(forServer: Bool = true, commonName: String = "Settee", hosts: [String] = [],
                                      expiration: Date? = nil, label: String = "settee-listener",
                                      directory: String) throws -> TLSIdentity {
        let key = P256.Signing.PrivateKey()
        let notAfter = expiration ?? Date(timeIntervalSinceNow: 365 * 24 * 3600)
        let name = try DistinguishedName { CommonName(commonName) }
        var alternativeNames: [GeneralName] = [.dnsName("localhost"),
                                               .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
                                               .ipAddress(ASN1OctetString(contentBytes: ArraySlice(Array(repeating: 0, count: 15) + [1])))]
        for host in Set([commonName] + hosts) where host != "localhost" {
            if let v4 = IPv4(host) { alternativeNames.append(.ipAddress(ASN1OctetString(contentBytes: ArraySlice(v4)))) } else {
                alternativeNames.append(.dnsName(host))
            }
        }
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: Date(timeIntervalSinceNow: -300), notValidAfter: notAfter,
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(digitalSignature: true, keyCertSign: true))
                try ExtendedKeyUsage([forServer ? .serverAuth : .clientAuth])
                SubjectAlternativeNames(alternativeNames)
            },
            issuerPrivateKey: .init(key))
        let certificatePath = (directory as NSString).appendingPathComponent(label + ".crt")
        let keyPath = (directory as NSString).appendingPathComponent(label + ".key")
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try certificate.serializeAsPEM().pemString.write(toFile: certificatePath, atomically: true, encoding: .utf8)
            _ = FileManager.default.createFile(atPath: keyPath, contents: Data(key.pemRepresentation.utf8),
                                           attributes: [.posixPermissions: 0o600])
        } catch {
            throw SetteeError(.storage, "Cannot write the TLS identity to \(directory): \(error)")
        }
        return TLSIdentity(certificatePath: certificatePath, keyPath: keyPath, expiration: notAfter)
    }

    /// The four bytes of a dotted IPv4 address.
    private static func IPv4(_ text: String) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        let bytes = parts.compactMap { UInt8($0) }
        return bytes.count == 4 ? bytes : nil
    }
}
