import CZlib

/// One direction's deflate stream and running CRC32 (BLIP sections 3.5 and 3.6).
///
/// Each direction of a connection compresses every compressed frame with one raw-deflate stream, flushed with
/// `Z_SYNC_FLUSH` after each frame and with the flush's `00 00 FF FF` trailer removed; the receiving side appends
/// the trailer back before inflating. The checksum is the running CRC32 of every non-acknowledgement frame's
/// uncompressed payload sent so far in the direction, compressed or not.
///
/// A class because zlib's stream lives at a fixed address; ``BLIPConnection`` owns one of each and is the only
/// user.
// @unchecked: the stream is mutated only through the owning BLIPConnection, which one task (or one lock) uses at a time.
final class BLIPDeflater: @unchecked Sendable {
    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private var ready = false
    private(set) var checksum: UInt32 = 0

    init(level: Int32) {
        stream.initialize(to: z_stream())
        ready = czlib_deflate_init_raw(stream, level) == Z_OK
    }

    deinit {
        if ready { deflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Adds `data` to the checksum without compressing it (an uncompressed frame).
    func addToChecksum(_ data: ArraySlice<UInt8>) {
        checksum = BLIPChecksum.update(checksum, data)
    }

    /// Adds `data` to the checksum and returns it deflated and flushed, without the sync-flush trailer.
    func compress(_ data: ArraySlice<UInt8>) throws(BLIPError) -> [UInt8] {
        guard ready else { throw BLIPError(.badCompression, "the deflate stream could not start") }
        checksum = BLIPChecksum.update(checksum, data)
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: max(1024, data.count + data.count / 8 + 64))
        let status: Int32 = data.withUnsafeBufferPointer { input in
            stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
            stream.pointee.avail_in = UInt32(input.count)
            var status = Z_OK
            repeat {
                status = chunk.withUnsafeMutableBufferPointer { out in
                    stream.pointee.next_out = out.baseAddress
                    stream.pointee.avail_out = UInt32(out.count)
                    let status = deflate(stream, Z_SYNC_FLUSH)
                    output.append(contentsOf: out[0..<(out.count - Int(stream.pointee.avail_out))])
                    return status
                }
            } while status == Z_OK && stream.pointee.avail_out == 0
            stream.pointee.next_in = nil
            return status
        }
        guard status == Z_OK || status == Z_BUF_ERROR, output.count >= 4, output.suffix(4) == [0, 0, 0xFF, 0xFF] else {
            throw BLIPError(.badCompression, "deflate failed (\(status))")
        }
        output.removeLast(4)
        return output
    }
}

/// The receiving direction: inflates compressed frames with one stream and keeps the running CRC32.
// @unchecked: as BLIPDeflater, owned and used by one BLIPConnection at a time.
final class BLIPInflater: @unchecked Sendable {
    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private var ready = false
    private(set) var checksum: UInt32 = 0

    init() {
        stream.initialize(to: z_stream())
        ready = czlib_inflate_init_raw(stream) == Z_OK
    }

    deinit {
        if ready { inflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    func addToChecksum(_ data: ArraySlice<UInt8>) {
        checksum = BLIPChecksum.update(checksum, data)
    }

    /// Inflates one compressed frame's payload (the trailer re-added), producing at most `limit` bytes.
    /// - Throws: ``BLIPError`` `.badCompression` for data that is not deflate, `.messageTooLarge` past `limit`.
    func decompress(_ data: ArraySlice<UInt8>, limit: Int) throws(BLIPError) -> [UInt8] {
        guard ready else { throw BLIPError(.badCompression, "the inflate stream could not start") }
        var input = Array(data)
        input.append(contentsOf: [0, 0, 0xFF, 0xFF])
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        var failure: BLIPError?
        input.withUnsafeMutableBufferPointer { input in
            stream.pointee.next_in = input.baseAddress
            stream.pointee.avail_in = UInt32(input.count)
            while true {
                let status = chunk.withUnsafeMutableBufferPointer { out in
                    stream.pointee.next_out = out.baseAddress
                    stream.pointee.avail_out = UInt32(out.count)
                    let status = inflate(stream, Z_SYNC_FLUSH)
                    output.append(contentsOf: out[0..<(out.count - Int(stream.pointee.avail_out))])
                    return status
                }
                if output.count > limit {
                    failure = BLIPError(.messageTooLarge, "a compressed frame inflates past the message size limit")
                    break
                }
                if status == Z_STREAM_END || status == Z_NEED_DICT || status == Z_DATA_ERROR || status == Z_MEM_ERROR
                    || status == Z_STREAM_ERROR {
                    if status != Z_OK { failure = BLIPError(.badCompression, "invalid deflate data (\(status))") }
                    break
                }
                if stream.pointee.avail_in == 0 && stream.pointee.avail_out > 0 { break }
                if status == Z_BUF_ERROR && stream.pointee.avail_out > 0 { break }
            }
            stream.pointee.next_in = nil
        }
        if let failure {
            ready = false
            inflateEnd(stream)
            throw failure
        }
        checksum = BLIPChecksum.update(checksum, output[...])
        return output
    }
}

/// zlib's CRC32, continued across calls.
enum BLIPChecksum {
    static func update(_ checksum: UInt32, _ data: ArraySlice<UInt8>) -> UInt32 {
        guard !data.isEmpty else { return checksum }
        return data.withUnsafeBufferPointer { UInt32(crc32(UInt(checksum), $0.baseAddress, UInt32($0.count))) }
    }
}
