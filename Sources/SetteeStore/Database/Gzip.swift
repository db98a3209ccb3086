import CZlib
import SetteeCore

/// gzip with the system zlib: attachments stored compressed (`[attachments] compressible_types`), as CouchDB stores
/// them, and request bodies sent with `Content-Encoding: gzip`.
public enum Gzip {
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
