import CZlib
import Foundation

/// gzip with the system zlib: request bodies sent with `Content-Encoding: gzip`, and attachments stored compressed
/// (`[attachments] compressible_types`), as CouchDB does.
enum Gzip {
    /// Compresses `bytes` into the gzip format at zlib `level` (1–9).
    static func compress(_ bytes: [UInt8], level: Int) throws -> [UInt8] {
        var stream = z_stream()
        guard czlib_deflate_init_gzip(&stream, Int32(level)) == Z_OK else { throw CouchError.badRequest("gzip: cannot start") }
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
        guard produced >= 0 else { throw CouchError.badRequest("gzip: compression failed") }
        output.removeSubrange(produced...)
        return output
    }

    /// Decompresses gzip (or zlib) data; past `limit` decompressed bytes it throws 413, so a small compressed body
    /// can't expand without bound. Invalid data is 400.
    static func decompress(_ bytes: [UInt8], limit: Int) throws -> [UInt8] {
        var stream = z_stream()
        guard czlib_inflate_init_gzip(&stream) == Z_OK else { throw CouchError.badRequest("gzip: cannot start") }
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
                if output.count > limit { throw CouchError.tooLarge }
                if status == Z_STREAM_END { return }
                guard status == Z_OK || (status == Z_BUF_ERROR && produced > 0) else {
                    throw CouchError.badRequest("Request body is not valid gzip data")
                }
                if stream.avail_in == 0 && produced == 0 { throw CouchError.badRequest("Request body is truncated gzip data") }
            }
        }
        return output
    }
}
