/// The lines of a batch command (`validate_batch`, `sync_batch`), built as the caller writes each write's arguments
/// straight into them (no buffer per write): `prefix` (the command up to its list of documents, opened), the writes'
/// arguments comma-separated, then `]]]` and a newline. A line holds at most about a megabyte and 100 writes
/// (settee-js gives each write the whole time limit, and this side waits for a line's answer up to that limit times
/// its writes); a write larger than that has a line of its own.
package struct BatchLines {
    static let lineBytes = 1 << 20
    static let lineWrites = 100
    private static let suffix: [UInt8] = Array("]]]\n".utf8)

    private let prefix: [UInt8]
    private var bytes: [UInt8] = []
    private var counts: [Int] = []
    private var inLine = 0
    private var lineStart = 0

    /// `capacity`: about how many bytes the writes' arguments take, all together.
    package init(prefix: [UInt8], capacity: Int) {
        self.prefix = prefix
        bytes.reserveCapacity(capacity + (prefix.count + Self.suffix.count) * (capacity / (Self.lineBytes / 4) + 2))
    }

    /// Adds one write: `write` appends its arguments' JSON text (`doc,oldDoc`) to the buffer it is given.
    package mutating func add(_ write: (inout [UInt8]) -> Void) {
        if inLine == Self.lineWrites { closeLine() }
        if inLine == 0 {
            lineStart = bytes.count
            bytes.append(contentsOf: prefix)
        } else {
            bytes.append(UInt8(ascii: ","))
        }
        let start = bytes.count
        write(&bytes)
        inLine += 1
        // Past the line's size with writes before it: this write starts the next line.
        if inLine > 1 && bytes.count - lineStart > Self.lineBytes {
            let arguments = Array(bytes[start...])
            bytes.removeSubrange((start - 1)...)  // and its comma
            inLine -= 1
            closeLine()
            lineStart = bytes.count
            bytes.append(contentsOf: prefix)
            bytes.append(contentsOf: arguments)
            inLine = 1
        }
    }

    private mutating func closeLine() {
        bytes.append(contentsOf: Self.suffix)
        counts.append(inLine)
        inLine = 0
    }

    /// The lines as one buffer, and how many writes each holds.
    package mutating func finish() -> (lines: [UInt8], counts: [Int]) {
        if inLine > 0 { closeLine() }
        return (bytes, counts)
    }
}
