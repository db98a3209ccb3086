import CZlib
import SetteeCore

/// gzip with the system zlib: attachments stored compressed (`[attachments] compressible_types`), as CouchDB stores
/// them, and request bodies sent with `Content-Encoding: gzip`.
package enum Gzip {
    /// Compresses `bytes` into the gzip format at zlib `level` (1–9).
    public static func compress(_ bytes: [UInt8], level: Int) throws -> [UInt8] {
        var stream = z_stream()
        guard czlib_deflate_init_gzip(&stream, Int32(level)) == Z_OK else { throw SetteeError(.internalError, "zlib could not start") }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(bytes.count))) + 32)
        var input = bytes
        let produced: Int = input.withUnsafeMutableBufferPointer { inBuf in
            output.withUnsafeMutableBufferPointer { outBuf in
                stream.next_in = inBuf.baseAddress
                stream.avail_in = uInt(inBuf.count)
                stream.next_out = outBuf.baseAddress
                stream.avail_out = uInt(outBuf.count)
                let status = deflate(&stream, Z_FINISH)
                return status == Z_STREAM_END ? outBuf.count - Int(stream.avail_out) : -1
            }
        }
        guard produced >= 0 else { throw SetteeError(.internalError, "zlib compression failed") }
        output.removeSubrange(produced...)
        return output
    }

    /// Decompresses gzip (or zlib) data; past `limit` decompressed bytes it throws 413, so a small compressed body
    /// can't expand without bound.
    /// - Throws: ``SetteeError`` `.tooLarge` past `limit`, `.badRequest` for data that isn't gzip or zlib.
    public static func decompress(_ bytes: [UInt8], limit: Int) throws -> [UInt8] {
        var stream = z_stream()
        guard czlib_inflate_init_gzip(&stream) == Z_OK else { throw SetteeError(.internalError, "zlib could not start") }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var input = bytes
        try input.withUnsafeMutableBufferPointer { inBuf in
            stream.next_in = inBuf.baseAddress
            stream.avail_in = uInt(inBuf.count)
            while true {
                let (status, produced): (Int32, Int) = chunk.withUnsafeMutableBufferPointer { outBuf in
                    stream.next_out = outBuf.baseAddress
                    stream.avail_out = uInt(outBuf.count)
                    let status = inflate(&stream, Z_NO_FLUSH)
                    return (status, outBuf.count - Int(stream.avail_out))
                }
                output.append(contentsOf: chunk[0..<produced])
                if output.count > limit { throw SetteeError(.tooLarge, "the request entity is too large") }
                if status == Z_STREAM_END { return }
                guard status == Z_OK || (status == Z_BUF_ERROR && produced > 0) else {
                    throw SetteeError(.badRequest, "not valid gzip data")
                }
                if stream.avail_in == 0 && produced == 0 { throw SetteeError(.badRequest, "truncated gzip data") }
            }
        }
        return output
    }
}

/// gzip compression or decompression a piece at a time, for attachment bodies too large to hold whole: each
/// ``process(_:finish:output:)`` call consumes one input piece and hands out what zlib produced from it.
///
/// Not `Sendable`: one task feeds it. The `z_stream` lives at a fixed heap address (zlib checks that it isn't moved).
package final class GzipStream {
    private enum Direction { case compressing, decompressing }

    private let stream: UnsafeMutablePointer<z_stream>
    private let direction: Direction
    private var output = [UInt8](repeating: 0, count: 64 * 1024)
    private var ended = false

    /// A stream that compresses into the gzip format at zlib `level` (1–9).
    public init(compressingAt level: Int) throws {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        direction = .compressing
        guard czlib_deflate_init_gzip(stream, Int32(level)) == Z_OK else {
            stream.deallocate()
            throw SetteeError(.internalError, "zlib could not start")
        }
    }

    /// A stream that decompresses gzip (or zlib) data.
    public init(decompressing: Void = ()) throws {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        direction = .decompressing
        guard czlib_inflate_init_gzip(stream) == Z_OK else {
            stream.deallocate()
            throw SetteeError(.internalError, "zlib could not start")
        }
    }

    deinit {
        switch direction {
        case .compressing: deflateEnd(stream)
        case .decompressing: inflateEnd(stream)
        }
        stream.deallocate()
    }

    /// Feeds `input` through; `finish` says it is the last piece (then a compressor writes its trailer, and a
    /// decompressor checks the data ended where the gzip stream does). `output` receives each produced piece.
    /// - Throws: ``SetteeError`` `.badRequest` for data that isn't gzip or is cut short.
    public func process(_ input: UnsafeRawBufferPointer, finish: Bool,
                        output emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: UInt8.self))
        stream.pointee.avail_in = uInt(input.count)
        defer { stream.pointee.next_in = nil; stream.pointee.avail_in = 0 }
        while true {
            if ended {
                guard stream.pointee.avail_in == 0 else { throw SetteeError(.badRequest, "data after the end of the gzip stream") }
                return
            }
            let (status, produced): (Int32, Int) = output.withUnsafeMutableBufferPointer { out in
                stream.pointee.next_out = out.baseAddress
                stream.pointee.avail_out = uInt(out.count)
                let status = switch direction {
                case .compressing: deflate(stream, finish ? Z_FINISH : Z_NO_FLUSH)
                case .decompressing: inflate(stream, Z_NO_FLUSH)
                }
                return (status, out.count - Int(stream.pointee.avail_out))
            }
            if produced > 0 { try output.withUnsafeBytes { try emit(UnsafeRawBufferPointer(rebasing: $0[0..<produced])) } }
            if status == Z_STREAM_END { ended = true; continue }
            guard status == Z_OK || status == Z_BUF_ERROR else {
                throw SetteeError(direction == .compressing ? .internalError : .badRequest, "not valid gzip data")
            }
            // zlib stops when it has consumed all input and has room left, or can make no progress.
            if stream.pointee.avail_in == 0 && stream.pointee.avail_out > 0 {
                if finish && direction == .decompressing { throw SetteeError(.badRequest, "truncated gzip data") }
                if !finish || direction == .decompressing { return }
            }
            if status == Z_BUF_ERROR && produced == 0 { throw SetteeError(.badRequest, "truncated gzip data") }
        }
    }
}
