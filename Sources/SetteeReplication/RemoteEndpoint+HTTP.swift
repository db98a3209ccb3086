import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import SetteeCore
import SetteeStore
import Synchronization

/// How a remote endpoint talks HTTP: requests with deadlines and size limits, cookie sign-in, peer errors as
/// replication errors, TLS failures named, and the HTTP clients it shares.
extension RemoteEndpoint {
    struct Reply {
        var status: Int
        var body: [UInt8]
        var contentType: String? = nil
        /// The body in a staging file instead of ``body`` (a large multipart answer, when asked to stage one); the
        /// caller removes the file.
        var staged: StagedBlob? = nil
    }

    /// Where large multipart answers and the attachment bodies in them are staged.
    static var stagingDirectory: String { StagedAttachment.directory }

    func jsonObject(_ method: HTTPMethod, _ path: String, query: [(String, String)] = [], body: JSON? = nil,
                            deadline: TimeAmount = .seconds(120)) async throws -> JSONObject {
        let r = try await send(method, path, query: query, body: body, deadline: deadline)
        guard (200..<300).contains(r.status) else { throw error(for: r, "\(method) \(urlString)\(path)") }
        guard case .object(let o) = try parse(r.body) else {
            throw ReplicationError(.transient, "\(method) \(path): the response is not a JSON object")
        }
        return o
    }

    func parse(_ bytes: [UInt8]) throws -> JSON {
        do {
            return try JSON.parse(bytes, limits: JSONLimits(maxDepth: 512, maxBytes: Int.max))
        } catch {
            throw ReplicationError(.transient, "unparseable or truncated response from \(urlString): \(error)")
        }
    }

    func error(for reply: Reply, _ what: String) -> ReplicationError {
        var detail = ""
        if case .object(let o)? = try? JSON.parse(reply.body) {
            detail = [o["error"]?.stringValue, o["reason"]?.stringValue].compactMap { $0 }.joined(separator: ": ")
        }
        return .peer(status: reply.status, "\(what) → \(reply.status)\(detail.isEmpty ? "" : " \(detail)")")
    }

    /// Sends a request and collects the whole response body.
    func send(_ method: HTTPMethod, _ path: String, query: [(String, String)] = [], body: JSON? = nil,
              raw: (contentType: String, bytes: [UInt8])? = nil, accept: String = "application/json",
              streamed: (contentType: String, body: MultipartSegments)? = nil,
              root: Bool = false, deadline: TimeAmount = .seconds(120), maxBytes: Int = 1 << 30,
              stageMultipart: Bool = false) async throws -> Reply {
        var target = (root ? serverURL : urlString) + path
        if !query.isEmpty {
            target += "?" + query.map { "\($0.0)=\(Self.escapeQuery($0.1))" }.joined(separator: "&")
        }
        var request = HTTPClientRequest(url: target)
        request.method = method
        request.headers.add(name: "Accept", value: accept)
        request.headers.add(name: "Accept-Encoding", value: "gzip")
        request.headers.add(name: "User-Agent", value: "Settee-Replicator")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body.serializedBytes))
        } else if let raw {
            request.headers.add(name: "Content-Type", value: raw.contentType)
            request.body = .bytes(ByteBuffer(bytes: raw.bytes))
        } else if let streamed {
            request.headers.add(name: "Content-Type", value: streamed.contentType)
            request.body = .stream(streamed.body, length: .known(Int64(streamed.body.length)))
        }
        var reply = try await execute(request, deadline: deadline, maxBytes: maxBytes, stageMultipart: stageMultipart)
        if reply.status == 401, case .session = authentication {
            session.cookie = nil  // expired: sign in again once
            reply = try await execute(request, deadline: deadline, maxBytes: maxBytes, stageMultipart: stageMultipart)
        }
        return reply
    }

    /// Sends a request and reads its answer whole; with `stageMultipart`, a successful `multipart/…` answer larger
    /// than a megabyte (or of unknown length) goes to a staging file as it arrives instead (``Reply/staged``).
    func execute(_ base: HTTPClientRequest, deadline: TimeAmount, maxBytes: Int, stageMultipart: Bool = false) async throws -> Reply {
        var request = base
        switch authentication {
        case .none: break
        case .basic(let user, let password):
            request.headers.add(name: "Authorization", value: "Basic " + Base64.encode(Array("\(user):\(password)".utf8)))
        case .bearer(let token):
            request.headers.add(name: "Authorization", value: "Bearer " + token)
        case .session(let user, let password):
            if session.cookie == nil { session.cookie = try await signIn(user: user, password: password) }
            if let cookie = session.cookie { request.headers.add(name: "Cookie", value: cookie) }
        }
        do {
            let response = try await client.execute(request, timeout: deadline)
            let contentType = response.headers.first(name: "Content-Type")
            if stageMultipart, (200..<300).contains(response.status.code), contentType?.lowercased().hasPrefix("multipart/") == true,
               response.headers.first(name: "Content-Length").flatMap(Int.init).map({ $0 > Self.stagedAttachmentThreshold }) ?? true {
                // Held in memory up to the threshold (CouchDB sends these chunked, of unknown length: most are
                // small), then spilled to a staging file as the rest arrives.
                var held = ByteBuffer()
                var file: StagingFile?
                var total = 0
                for try await chunk in response.body {
                    total += chunk.readableBytes
                    if total > maxBytes {
                        throw ReplicationError(.transient, "\(request.method) \(Self.redact(request.url)): the answer is larger than \(maxBytes) bytes")
                    }
                    if let file {
                        try chunk.withUnsafeReadableBytes { try file.append($0) }
                        continue
                    }
                    var piece = chunk
                    held.writeBuffer(&piece)
                    if held.readableBytes > Self.stagedAttachmentThreshold {
                        let spill = try StagingFile(directory: Self.stagingDirectory, compressingAt: nil)
                        try held.withUnsafeReadableBytes { try spill.append($0) }
                        held = ByteBuffer()
                        file = spill
                    }
                }
                if let file {
                    return Reply(status: Int(response.status.code), body: [], contentType: contentType, staged: try file.finish())
                }
                return Reply(status: Int(response.status.code), body: Array(held.readableBytesView), contentType: contentType)
            }
            let buffer = try await response.body.collect(upTo: maxBytes)
            return Reply(status: Int(response.status.code), body: Array(buffer.readableBytesView),
                         contentType: response.headers.first(name: "Content-Type"))
        } catch let error as ReplicationError {
            throw error
        } catch let error as SetteeError {
            throw ReplicationError(.local, error.reason)
        } catch is CancellationError {
            throw ReplicationError(.cancelled, "stopped")
        } catch {
            if Task.isCancelled { throw ReplicationError(.cancelled, "stopped") }
            if let tls = tlsError(error) { throw tls }
            throw ReplicationError(.unreachable, "cannot reach \(Self.redact(request.url)) (\(request.method)): \(error)")
        }
    }

    func signIn(user: String, password: String) async throws -> String? {
        // A `ws://` endpoint's server signs in over HTTP at the same address.
        var request = HTTPClientRequest(url: RemoteEndpoint.httpForm(serverURL) + "/_session")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Accept", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: JSON.object(["name": .string(user), "password": .string(password)]).serializedBytes))
        do {
            let response = try await client.execute(request, timeout: .seconds(30))
            _ = try await response.body.collect(upTo: 1 << 20)
            if response.status.code == 401 {
                throw ReplicationError(.unauthorized, "POST /_session: name or password is incorrect", status: 401)
            }
            for value in response.headers["Set-Cookie"] {
                if let pair = value.split(separator: ";").first, pair.hasPrefix("AuthSession=") { return String(pair) }
            }
            return nil
        } catch let error as ReplicationError {
            throw error
        } catch {
            if let tls = tlsError(error) { throw tls }
            throw ReplicationError(.unreachable, "POST \(serverURL)/_session: \(error)")
        }
    }

    /// A failed TLS handshake (an untrusted, expired or wrong-host certificate, or a peer that does not speak
    /// TLS) as a ``ReplicationError/Kind/tls`` error, which stops the replication instead of being retried.
    func tlsError(_ error: any Error) -> ReplicationError? {
        ReplicationError.tls(error, host: URLComponents(string: serverURL)?.host ?? serverURL, hint: tlsHint)
    }

    /// How the peer's certificate is verified, for a TLS error's message.
    var tlsHint: String {
        trustedRootCertificatesPath == nil
            ? "verified against the system's trust store; for a private CA pass its certificate (--ca-file)"
            : "verified against \(trustedRootCertificatesPath!)"
    }
}

extension ReplicationError {
    /// A failed TLS handshake (an untrusted, expired or wrong-host certificate, or a peer that does not speak TLS)
    /// as a `.tls` error, which stops a replication instead of being retried; nil for any other error.
    static func tls(_ error: any Error, host: String, hint: String) -> ReplicationError? {
        switch error {
        case let e as NIOSSLError:
            return ReplicationError(.tls, "TLS handshake with \(host) failed (\(hint)): \(e)")
        case let e as NIOSSLExtraError:
            return ReplicationError(.tls, "TLS certificate of \(host) rejected (\(hint)): \(e)")
        case let e as BoringSSLError:
            return ReplicationError(.tls, "TLS handshake with \(host) failed (\(hint)): \(e)")
        default:
            return nil
        }
    }
}
