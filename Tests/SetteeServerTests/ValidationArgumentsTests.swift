import Foundation
@testable import SetteeServer
import Settee
import Testing

/// `validate_doc_update`'s `newDoc` and `oldDoc`, written straight as JSON text for a batch, are the documents the
/// reference path builds as objects (`_id`, `_rev` — the parent's or a replicated revision's — `_deleted`, the body).
@Suite struct ValidationArgumentsTests {
    @Test func serializedArgumentsAreTheDocumentsTheFunctionSees() throws {
        let parent = RevID("3-abcdef0123456789abcdef0123456789")!
        let replicated = RevID("7-0123456789abcdef0123456789abcdef")!
        let bodies: [JSONObject] = [
            [:],
            ["type": "user", "email": "a@b.c", "tags": ["x", "y"], "n": 1.5, "nested": ["k": .null]],
            ["é": "ü\u{0}\"\\", "emoji": "😀"],
            ["_id": "inside", "other": true],  // (not what the store keeps: the added members still win)
        ]
        let modes: [RevisionWrite.Mode] = [.edit(parent: nil), .edit(parent: parent), .replicated(history: [replicated, parent]), .overwrite]
        for body in bodies {
            for mode in modes {
                for deleted in [false, true] {
                    let currents: [(rev: String, body: JSONObject)?] = [nil, (rev: parent.description, body: ["old": 1]),
                                                                         (rev: parent.description, body: body)]
                    for current in currents {
                        let write = RevisionWrite(id: "doc/ü", body: body, deleted: deleted, mode: mode)
                        let reference = DocumentValidator.arguments(write, current: current)
                        let text = [UInt8(ascii: "[")] + DocumentValidator.serializedArguments(write, current: current) + [UInt8(ascii: "]")]
                        let parsed = try JSON.parse(text)
                        #expect(parsed.canonicalBytes == JSON.array([reference.new, reference.old]).canonicalBytes,
                                "\(String(decoding: text, as: UTF8.self))")
                    }
                }
            }
        }
    }
}
