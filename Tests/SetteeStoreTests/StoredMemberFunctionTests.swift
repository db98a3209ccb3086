import CSQLite
import Foundation
import SetteeCore
import Testing

@testable import SetteeStore

/// `settee_member(body, path)` answers the comparisons a query's scan prefilter makes exactly as `json_extract`
/// does (SQLite's own, run beside it on the same bodies): same type for numbers, booleans and null, text for
/// strings, arrays and objects, NULL where nothing is.
@Suite struct StoredMemberFunctionTests {
    static let bodies = [
        #"{"a":1,"b":"x","c":true,"d":false,"e":null,"f":[1,2],"g":{"h":-7,"i":2.5}}"#,
        #"{"g":{"i":1e3,"h":12345678901234567},"a":-0,"b":"with \"quotes\" and \\ slash"}"#,
        #"{ "a" : 30 , "c" : 1 , "z" : {"a": 99} }"#,
        #"{"x":1}"#, #"{}"#, #"[1,2,3]"#, #"{"a":123456789012345678901234567890,"g":5}"#,
        #"{"b\u0041":1,"a":4}"#,  // an escaped key: the full parser decides
    ]
    static let paths = ["$.a", "$.b", "$.c", "$.d", "$.e", "$.f", "$.g", "$.g.h", "$.g.i", "$.g.x", "$.z.a", "$.missing"]

    @Test func answersAsJSONExtractDoes() throws {
        let dir = try SQLiteTempDirectory()
        let db = try Connection(path: dir.path())
        let stmt = try db.prepare("""
            SELECT typeof(settee_member(?1, ?2)), typeof(json_extract(?1, ?2)),
                   settee_member(?1, ?2) = json_extract(?1, ?2), settee_member(?1, ?2) >= 30, json_extract(?1, ?2) >= 30
            """)
        var types: Set<String> = []
        for body in Self.bodies {
            for path in Self.paths {
                // Stored bodies are BLOBs of JSON text.
                stmt.bind(bytes: Array(body.utf8), at: 1)
                stmt.bind(path, at: 2)
                #expect(try stmt.step())
                let (mine, theirs) = (stmt.string(0), stmt.string(1))
                #expect(mine == theirs, "\(body) \(path): \(mine ?? "?") vs \(theirs ?? "?")")
                types.insert(mine ?? "?")
                if theirs == "integer" || theirs == "real" {
                    #expect(stmt.int64(2) == 1, "\(body) \(path): the values differ")
                }
                #expect(stmt.isNull(3) == stmt.isNull(4) && stmt.int64(3) == stmt.int64(4), "\(body) \(path): >= 30 differs")
                stmt.reset()
            }
        }
        // Every kind of answer was met (not NULL all along).
        #expect(types == ["integer", "real", "text", "null"])
    }
}
