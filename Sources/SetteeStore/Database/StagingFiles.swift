import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SetteeCore

/// An attachment body being written to a staging file: the bytes as they will be stored (gzip-compressed on the way
/// when asked, unless empty), with the digest of the stored bytes computed as it goes. The server stages uploads
/// this way and the replicator the large attachments it reads; the write that stores one copies the file into
/// SQLite a megabyte at a time (``StagedBlob``). The file is removed when this is released, unless ``finish()``
/// handed it on.
package final class StagingFile {
    package let path: String
    private var fd: Int32
    private let level: Int?
    private var compressor: GzipStream?
    private var hasher = MD5.Hasher()
    /// The bytes given so far (the attachment's own length).
    package private(set) var length = 0
    /// The bytes written to the file so far (compressed or not).
    private var stored = 0
    private var handedOn = false

    /// Creates the file in `directory` (made if missing).
    /// - Parameter level: The gzip level to compress at, or nil to store the bytes as given.
    /// - Throws: ``SetteeError`` `.internalError` if the file can't be created.
    package init(directory: String, compressingAt level: Int?) throws {
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        path = (directory as NSString).appendingPathComponent(UUID().uuidString)
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        self.level = level
        guard fd >= 0 else { throw SetteeError(.internalError, "an attachment can't be staged in \(directory): errno \(errno)") }
    }

    deinit {
        if fd >= 0 { close(fd) }
        if !handedOn { unlink(path) }
    }

    /// Appends bytes of the attachment.
    package func append(_ bytes: UnsafeRawBufferPointer) throws {
        guard !bytes.isEmpty else { return }
        if length == 0, let level { compressor = try GzipStream(compressingAt: level) }
        length += bytes.count
        if let compressor { try compressor.process(bytes, finish: false, output: keep) } else { try keep(bytes) }
    }

    /// Ends the file: the body ready to be stored (the file is the caller's to remove now).
    package func finish() throws -> StagedBlob {
        if let compressor { try compressor.process(UnsafeRawBufferPointer(start: nil, count: 0), finish: true, output: keep) }
        close(fd)
        fd = -1
        handedOn = true
        return StagedBlob(digest: "md5-" + Base64.encode(hasher.finalize()), path: path, length: stored,
                          encoding: compressor == nil ? nil : "gzip")
    }

    private func keep(_ bytes: UnsafeRawBufferPointer) throws {
        hasher.update(bytes)
        stored += bytes.count
        var rest = bytes
        while !rest.isEmpty {
            let n = write(fd, rest.baseAddress, rest.count)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw SetteeError(.internalError, "an attachment can't be staged: errno \(errno)") }
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
        }
    }
}

/// A file mapped read-only, unmapped when released: a staged multipart body, its parts found where they lie.
package final class MappedFile {
    package let bytes: UnsafeBufferPointer<UInt8>
    private let base: UnsafeMutableRawPointer
    private let length: Int
    private static let piece = 1 << 20

    /// - Throws: ``SetteeError`` `.internalError` if the file can't be opened or mapped.
    package init(path: String, length: Int) throws {
        precondition(length > 0, "an empty file can't be mapped")
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SetteeError(.internalError, "\(path) can't be read: errno \(errno)") }
        defer { close(fd) }
        guard let base = mmap(nil, length, PROT_READ, MAP_PRIVATE, fd, 0), base != MAP_FAILED else {
            throw SetteeError(.internalError, "\(path) can't be mapped: errno \(errno)")
        }
        self.base = base
        self.length = length
        bytes = UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: length)
    }

    deinit { munmap(base, length) }

    /// Calls `body` with `range` a megabyte at a time, letting the pages read go (they stay in the page cache, out
    /// of the process's resident memory).
    package func forEachPiece(of range: Range<Int>, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        var offset = range.lowerBound
        while offset < range.upperBound {
            let end = min(range.upperBound, offset + Self.piece)
            try body(UnsafeRawBufferPointer(start: base + offset, count: end - offset))
            release(upTo: end)
            offset = end
        }
    }

    /// The length of a gzip stream's decoded bytes.
    package func inflatedLength(of range: Range<Int>) throws -> Int {
        let inflater = try GzipStream()
        var total = 0
        try forEachPiece(of: range) { piece in
            try inflater.process(piece, finish: false) { total += $0.count }
        }
        try inflater.process(UnsafeRawBufferPointer(start: nil, count: 0), finish: true) { total += $0.count }
        return total
    }

    private func release(upTo end: Int) {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let aligned = end / page * page
        if aligned > 0 { madvise(base, aligned, MADV_DONTNEED) }
    }
}
