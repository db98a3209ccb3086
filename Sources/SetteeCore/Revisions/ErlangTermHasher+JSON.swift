/// JSON as jiffy decodes it (CouchDB's "EJSON"): an object is `{[{Key, Value}, …]}` (a 1-tuple holding a list of
/// 2-tuples, keys as binaries) in document order, an array a list, a string its UTF-8 binary, `true`/`false`/`null`
/// atoms, a number an integer or a float as the ``JSON`` case says.
///
/// The walk hashes a value's term and, in the same pass, writes the value's compact JSON text — the bytes
/// ``JSON/serialize(into:)`` writes — so a store write serializes its body and computes its revision id while
/// visiting each member, string and number once.
extension ErlangTermHasher {
    /// Hashes `value`'s term and appends its JSON text to `text`.
    mutating func json(_ value: JSON, text: inout ByteWriter) {
        switch value {
        case .null:
            nullAtom()
            text.appendLiteral("null")
        case .bool(let flag):
            atom(flag)
            text.appendLiteral(flag ? "true" : "false")
        case .int(let number):
            integer(number)
            JSONWriter.writeInteger(number, into: &text)
        case .double(let number):
            // What is stored: the serializer writes a non-finite double (only the Swift API can make one) as null.
            if number.isFinite { float(number) } else { nullAtom() }
            JSONWriter.writeDouble(number, into: &text)
        case .string(let string):
            self.string(string, text: &text)
        case .array(let elements):
            array(elements, text: &text)
        case .object(let members):
            object(members, skippingSpecials: false, text: &text)
        }
    }

    /// A string: its binary, and its quoted, escaped text.
    mutating func string(_ string: String, text: inout ByteWriter) {
        let done: Void? = string.utf8.withContiguousStorageIfAvailable { utf8 in
            binary(UnsafeRawBufferPointer(utf8))
            text.append(UInt8(ascii: "\""))
            JSONWriter.writeEscaped(utf8, into: &text)
            text.append(UInt8(ascii: "\""))
        }
        if done == nil {
            var copy = string
            copy.makeContiguousUTF8()
            self.string(copy, text: &text)
        }
    }

    mutating func array(_ elements: [JSON], text: inout ByteWriter) {
        text.append(UInt8(ascii: "["))
        elements.withUnsafeBufferPointer { elements in
            guard let base = elements.baseAddress, !elements.isEmpty else { return nilList() }
            let n = elements.count
            if n <= 65_535 && elements.allSatisfy(\.isByteInteger) {
                // term_to_binary writes a list of small integers as a string.
                bytes(107, UInt8(truncatingIfNeeded: n >> 8))
                byte(UInt8(truncatingIfNeeded: n))
                for i in 0..<n {
                    guard case .int(let v) = base[i] else { continue }
                    byte(UInt8(truncatingIfNeeded: v))
                    if i > 0 { text.append(UInt8(ascii: ",")) }
                    JSONWriter.writeInteger(v, into: &text)
                }
                return
            }
            listHeader(n)
            for i in 0..<n {
                if i > 0 { text.append(UInt8(ascii: ",")) }
                json(base[i], text: &text)
            }
            nilList()
        }
        text.append(UInt8(ascii: "]"))
    }

    /// `{[{Key, Value}, …]}` in the object's order, and the object's text. With `skippingSpecials`, the members
    /// CouchDB takes out of a document's body (``RevID/isBodySpecial(_:)``) are written to the text only.
    mutating func object(_ object: JSONObject, skippingSpecials: Bool, text: inout ByteWriter) {
        tupleHeader(1)
        text.append(UInt8(ascii: "{"))
        object.entries.withUnsafeBufferPointer { members in
            guard let base = members.baseAddress else { return nilList() }
            let n = members.count
            var specials = 0
            if skippingSpecials {
                for i in 0..<n where RevID.isBodySpecial(base[i].key) { specials += 1 }
            }
            if n > specials { listHeader(n - specials) }
            for i in 0..<n {
                if i > 0 { text.append(UInt8(ascii: ",")) }
                if specials > 0 && RevID.isBodySpecial(base[i].key) {
                    JSONWriter.writeString(base[i].key, into: &text)
                    text.append(UInt8(ascii: ":"))
                    JSONWriter.write(base[i].value, sortingKeys: false, into: &text)
                    continue
                }
                tupleHeader(2)
                string(base[i].key, text: &text)
                text.append(UInt8(ascii: ":"))
                json(base[i].value, text: &text)
            }
            nilList()  // the proplist's tail, or the whole of an empty one
        }
        text.append(UInt8(ascii: "}"))
    }

    /// Hashes `value`'s term only (the text goes to a scratch buffer on the stack).
    mutating func json(_ value: JSON) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { storage in
            var scratch = ByteWriter(initialStorage: storage)
            json(value, text: &scratch)
        }
    }

    /// Hashes an object's term only; see ``object(_:skippingSpecials:text:)``.
    mutating func object(_ object: JSONObject, skippingSpecials: Bool) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { storage in
            var scratch = ByteWriter(initialStorage: storage)
            self.object(object, skippingSpecials: skippingSpecials, text: &scratch)
        }
    }
}

extension ByteWriter {
    @inline(__always)
    mutating func appendLiteral(_ literal: StaticString) {
        append(UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }
}

extension JSON {
    /// An integer 0…255: an element `term_to_binary` can pack into a `STRING_EXT`.
    @inline(__always)
    fileprivate var isByteInteger: Bool {
        if case .int(let v) = self { return v >= 0 && v <= 255 }
        return false
    }
}
