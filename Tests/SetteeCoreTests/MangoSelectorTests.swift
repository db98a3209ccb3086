import Testing
@testable import SetteeCore

/// Parses JSON text (keeps backslashes and key order readable in the tests).
private func json(_ text: String) -> JSON {
    do { return try JSON.parse(text) } catch { fatalError("bad test JSON: \(text): \(error)") }
}

/// Whether the selector text matches the document text.
private func matches(_ selector: String, _ document: String) throws -> Bool {
    try MangoSelector(json(selector)).matches(json(document))
}

/// The reason the selector text is rejected with, or nil if it is accepted.
private func rejection(_ selector: String) -> String? {
    do {
        _ = try MangoSelector(json(selector))
        return nil
    } catch {
        #expect(error.code == .badRequest)
        return error.reason
    }
}

@Suite struct MangoSelectorTests {
    // MARK: Implicit operators and field paths

    @Test func emptySelectorMatchesEveryDocument() throws {
        #expect(try matches(#"{}"#, #"{"_id":"a"}"#))
        #expect(try matches(#"{}"#, #"{}"#))
    }

    @Test func bareValueIsEqualityAndKeysAreAnded() throws {
        let doc = #"{"_id":"a","name":"Bob","age":30}"#
        #expect(try matches(#"{"name":"Bob"}"#, doc))
        #expect(try matches(#"{"name":"Bob","age":30}"#, doc))
        #expect(try !matches(#"{"name":"Bob","age":31}"#, doc))
        #expect(try !matches(#"{"name":"Alice"}"#, doc))
    }

    @Test func dottedPathsReachIntoNestedObjects() throws {
        let doc = #"{"a":{"b":{"c":1}}}"#
        #expect(try matches(#"{"a.b.c":1}"#, doc))
        #expect(try !matches(#"{"a.b.c":2}"#, doc))
        #expect(try !matches(#"{"a.x.c":1}"#, doc))
    }

    @Test func backslashEscapedDotIsPartOfTheKey() throws {
        #expect(try matches(#"{"a\\.b":1}"#, #"{"a.b":1}"#))
        #expect(try !matches(#"{"a\\.b":1}"#, #"{"a":{"b":1}}"#))
        #expect(try matches(#"{"x.a\\.b":1}"#, #"{"x":{"a.b":1}}"#))
    }

    @Test func nestedObjectIsASubSelectorLikeADottedPath() throws {
        let doc = #"{"a":{"b":1,"c":2}}"#
        #expect(try matches(#"{"a":{"b":1}}"#, doc))
        #expect(try matches(#"{"a":{"b":{"$gt":0},"c":2}}"#, doc))
        #expect(try !matches(#"{"a":{"b":2}}"#, doc))
    }

    @Test func nestedObjectWhoseKeysAreOperatorsIsACondition() throws {
        #expect(try matches(#"{"a":{"$gt":1,"$lt":5}}"#, #"{"a":3}"#))
        #expect(try !matches(#"{"a":{"$gt":1,"$lt":5}}"#, #"{"a":5}"#))
    }

    @Test func nestedEmptyObjectMeansEqualToEmptyObject() throws {
        #expect(try matches(#"{"a":{}}"#, #"{"a":{}}"#))
        #expect(try !matches(#"{"a":{}}"#, #"{"a":{"b":1}}"#))
    }

    @Test func integerPathSegmentIndexesIntoArrays() throws {
        let doc = #"{"a":[{"b":1},{"b":2}]}"#
        #expect(try matches(#"{"a.1.b":2}"#, doc))
        #expect(try !matches(#"{"a.0.b":2}"#, doc))
        #expect(try !matches(#"{"a.5.b":2}"#, doc))
    }

    @Test func equalityOnAnArrayFieldComparesTheWholeArray() throws {
        let doc = #"{"tags":["x","y"]}"#
        #expect(try matches(#"{"tags":["x","y"]}"#, doc))
        #expect(try !matches(#"{"tags":"x"}"#, doc))
        #expect(try !matches(#"{"tags":["y","x"]}"#, doc))
    }

    @Test func objectEqualityIgnoresKeyOrder() throws {
        let doc = #"{"o":{"a":1,"b":[1,{"c":2,"d":3}]}}"#
        #expect(try matches(#"{"o":{"$eq":{"b":[1,{"d":3,"c":2}],"a":1}}}"#, doc))
        #expect(try !matches(#"{"o":{"$eq":{"a":1}}}"#, doc))
        #expect(try !matches(#"{"o":{"$ne":{"b":[1,{"d":3,"c":2}],"a":1}}}"#, doc))
    }

    @Test func metadataFieldsAreMatchable() throws {
        let doc = #"{"_id":"doc-1","_rev":"1-abc","_deleted":true}"#
        #expect(try matches(#"{"_id":{"$gt":null},"_deleted":true}"#, doc))
        #expect(try matches(#"{"_rev":{"$beginsWith":"1-"}}"#, doc))
    }

    // MARK: Comparison and collation

    @Test func comparisonOperatorsCompareNumbersAcrossIntAndDouble() throws {
        let doc = #"{"n":2}"#
        #expect(try matches(#"{"n":{"$eq":2.0}}"#, doc))
        #expect(try matches(#"{"n":{"$lt":2.5}}"#, doc))
        #expect(try matches(#"{"n":{"$lte":2}}"#, doc))
        #expect(try matches(#"{"n":{"$gte":2}}"#, doc))
        #expect(try matches(#"{"n":{"$gt":1.999}}"#, doc))
        #expect(try !matches(#"{"n":{"$gt":2}}"#, doc))
        #expect(try !matches(#"{"n":{"$lt":2}}"#, doc))
        #expect(try matches(#"{"n":{"$ne":3}}"#, doc))
    }

    @Test func valuesOfDifferentTypesSortInCollationOrder() throws {
        // null < false < true < numbers < strings < arrays < objects
        let ladder = [#"null"#, #"false"#, #"true"#, #"-5"#, #"1e10"#, #""""#, #""a""#, #"[]"#, #"[1]"#, #"{}"#,
                      #"{"a":1}"#]
        for (i, lower) in ladder.enumerated() {
            for higher in ladder[(i + 1)...] {
                #expect(try matches(#"{"v":{"$lt":\#(higher)}}"#, #"{"v":\#(lower)}"#), "\(lower) < \(higher)")
                #expect(try !matches(#"{"v":{"$gte":\#(higher)}}"#, #"{"v":\#(lower)}"#), "\(lower) < \(higher)")
            }
        }
    }

    @Test func stringsCompareByUnicodeScalar() throws {
        #expect(try matches(#"{"s":{"$lt":"b"}}"#, #"{"s":"a"}"#))
        #expect(try matches(#"{"s":{"$lt":"a"}}"#, #"{"s":"Z"}"#))
        #expect(try matches(#"{"s":{"$lt":"ab"}}"#, #"{"s":"a"}"#))
        #expect(try matches(#"{"s":{"$gt":"z"}}"#, #"{"s":"é"}"#))
    }

    @Test func arraysCompareElementwiseThenByLength() throws {
        #expect(try matches(#"{"a":{"$lt":[1,3]}}"#, #"{"a":[1,2,9]}"#))
        #expect(try matches(#"{"a":{"$lt":[1,2,0]}}"#, #"{"a":[1,2]}"#))
    }

    @Test func largeIntegersCompareExactlyWithDoubles() throws {
        #expect(try matches(#"{"n":{"$gt":9007199254740992.0}}"#, #"{"n":9007199254740993}"#))
        #expect(try matches(#"{"n":{"$lt":1e19}}"#, #"{"n":9223372036854775807}"#))
    }

    // MARK: Missing fields

    @Test func missingFieldMatchesOnlyExistsFalse() throws {
        let doc = #"{"_id":"a"}"#
        #expect(try matches(#"{"f":{"$exists":false}}"#, doc))
        #expect(try !matches(#"{"f":{"$exists":true}}"#, doc))
        #expect(try !matches(#"{"f":null}"#, doc))
        #expect(try !matches(#"{"f":{"$lt":1}}"#, doc))
        #expect(try !matches(#"{"f":{"$type":"null"}}"#, doc))
        #expect(try matches(#"{"f":{"$exists":true}}"#, #"{"f":null}"#))
        #expect(try !matches(#"{"f":{"$exists":false}}"#, #"{"f":null}"#))
    }

    /// CouchDB `mango_selector:match/3`: a field that `get_field` reports `not_found` fails every
    /// condition except `{"$exists": false}` — `$ne` and `$nin` included.
    @Test func neAndNinDoNotMatchAMissingField() throws {
        let doc = #"{"_id":"a"}"#
        #expect(try !matches(#"{"f":{"$ne":1}}"#, doc))
        #expect(try !matches(#"{"f":{"$nin":[1,2]}}"#, doc))
        #expect(try matches(#"{"f":{"$ne":1}}"#, #"{"f":2}"#))
        #expect(try matches(#"{"f":{"$nin":[1,2]}}"#, #"{"f":3}"#))
    }

    /// CouchDB pushes `$not` down to the field (`{"$not":{"f":1}}` becomes `{"f":{"$ne":1}}`), so a
    /// negated condition still needs the field — except negated `$exists`, which flips.
    @Test func notStillRequiresTheFieldExceptForExists() throws {
        let doc = #"{"_id":"a"}"#
        #expect(try !matches(#"{"$not":{"f":1}}"#, doc))
        #expect(try !matches(#"{"f":{"$not":{"$regex":"x"}}}"#, doc))
        #expect(try !matches(#"{"$nor":[{"f":1}]}"#, doc))
        #expect(try matches(#"{"$not":{"f":{"$exists":true}}}"#, doc))
        #expect(try matches(#"{"f":{"$not":{"$exists":true}}}"#, doc))
        #expect(try !matches(#"{"$not":{"f":{"$exists":false}}}"#, doc))
    }

    @Test func existsFalseDoesNotMatchAPathThroughAScalar() throws {
        // get_field returns bad_path (not not_found) when the path runs into a non-container.
        #expect(try !matches(#"{"a.b":{"$exists":false}}"#, #"{"a":5}"#))
        #expect(try matches(#"{"a.b":{"$exists":false}}"#, #"{"a":{}}"#))
        #expect(try matches(#"{"a.b":{"$exists":false}}"#, #"{}"#))
    }

    // MARK: Combination operators

    @Test func andOrNorCombineSubSelectors() throws {
        let doc = #"{"a":1,"b":2}"#
        #expect(try matches(#"{"$and":[{"a":1},{"b":2}]}"#, doc))
        #expect(try !matches(#"{"$and":[{"a":1},{"b":3}]}"#, doc))
        #expect(try matches(#"{"$or":[{"a":5},{"b":2}]}"#, doc))
        #expect(try !matches(#"{"$or":[{"a":5},{"b":5}]}"#, doc))
        #expect(try matches(#"{"$nor":[{"a":5},{"b":5}]}"#, doc))
        #expect(try !matches(#"{"$nor":[{"a":5},{"b":2}]}"#, doc))
    }

    @Test func notNegatesItsSelector() throws {
        let doc = #"{"a":1,"b":2}"#
        #expect(try matches(#"{"$not":{"a":2}}"#, doc))
        #expect(try !matches(#"{"$not":{"a":1}}"#, doc))
        #expect(try matches(#"{"$not":{"$and":[{"a":1},{"b":3}]}}"#, doc))
        #expect(try !matches(#"{"$not":{"$or":[{"a":1},{"b":3}]}}"#, doc))
        #expect(try matches(#"{"$not":{"$not":{"a":1}}}"#, doc))
        #expect(try matches(#"{"a":{"$not":{"$in":[2,3]}}}"#, doc))
        #expect(try !matches(#"{"a":{"$not":{"$lte":1}}}"#, doc))
    }

    @Test func combinationOperatorsInsideAFieldApplyToThatField() throws {
        #expect(try matches(#"{"a":{"$or":[1,2]}}"#, #"{"a":2}"#))
        #expect(try matches(#"{"a":{"$or":[{"b":1},{"c":2}]}}"#, #"{"a":{"c":2}}"#))
        #expect(try !matches(#"{"a":{"$and":[{"$gt":1},{"$lt":3}]}}"#, #"{"a":3}"#))
    }

    @Test func emptyAndAndOrMatchEverything() throws {
        // CouchDB treats an empty $and and an empty $or as true.
        #expect(try matches(#"{"$and":[]}"#, #"{"a":1}"#))
        #expect(try matches(#"{"$or":[]}"#, #"{"a":1}"#))
    }

    // MARK: Array operators

    @Test func inMatchesAnyOperandAndAnyElementOfAnArrayField() throws {
        #expect(try matches(#"{"a":{"$in":[1,2,3]}}"#, #"{"a":2}"#))
        #expect(try !matches(#"{"a":{"$in":[1,2,3]}}"#, #"{"a":4}"#))
        #expect(try matches(#"{"a":{"$in":["x","q"]}}"#, #"{"a":["p","q"]}"#))
        #expect(try !matches(#"{"a":{"$in":["x"]}}"#, #"{"a":["p","q"]}"#))
        #expect(try !matches(#"{"a":{"$in":[]}}"#, #"{"a":1}"#))
        // An array field is compared element by element, never as a whole.
        #expect(try !matches(#"{"a":{"$in":[["p","q"]]}}"#, #"{"a":["p","q"]}"#))
    }

    @Test func ninRejectsAnArrayFieldWithAnyListedElement() throws {
        #expect(try matches(#"{"a":{"$nin":["x"]}}"#, #"{"a":["p","q"]}"#))
        #expect(try !matches(#"{"a":{"$nin":["q"]}}"#, #"{"a":["p","q"]}"#))
        #expect(try matches(#"{"a":{"$nin":[]}}"#, #"{"a":1}"#))
    }

    @Test func allRequiresEveryOperandInTheArray() throws {
        let doc = #"{"tags":["a","b","c"]}"#
        #expect(try matches(#"{"tags":{"$all":["c","a"]}}"#, doc))
        #expect(try !matches(#"{"tags":{"$all":["a","d"]}}"#, doc))
        #expect(try !matches(#"{"tags":{"$all":[]}}"#, doc))
        #expect(try !matches(#"{"tags":{"$all":["a"]}}"#, #"{"tags":"a"}"#))
        // A single array operand also matches a field equal to it.
        #expect(try matches(#"{"tags":{"$all":[["a","b","c"]]}}"#, doc))
        #expect(try matches(#"{"m":{"$all":[[1,2]]}}"#, #"{"m":[[1,2],3]}"#))
    }

    @Test func elemMatchNeedsOneMatchingElement() throws {
        let doc = #"{"s":[70,82,95],"o":[{"n":"x","v":1},{"n":"y","v":2}]}"#
        #expect(try matches(#"{"s":{"$elemMatch":{"$gte":80,"$lt":85}}}"#, doc))
        #expect(try !matches(#"{"s":{"$elemMatch":{"$gte":96}}}"#, doc))
        #expect(try matches(#"{"o":{"$elemMatch":{"n":"y","v":2}}}"#, doc))
        #expect(try !matches(#"{"o":{"$elemMatch":{"n":"x","v":2}}}"#, doc))
        #expect(try !matches(#"{"s":{"$elemMatch":{"$gt":0}}}"#, #"{"s":[]}"#))
        #expect(try !matches(#"{"s":{"$elemMatch":{"$gt":0}}}"#, #"{"s":5}"#))
    }

    @Test func allMatchNeedsEveryElementAndANonEmptyArray() throws {
        #expect(try matches(#"{"g":{"$allMatch":{"$eq":"h"}}}"#, #"{"g":["h","h"]}"#))
        #expect(try !matches(#"{"g":{"$allMatch":{"$eq":"h"}}}"#, #"{"g":["h","c"]}"#))
        #expect(try !matches(#"{"g":{"$allMatch":{"$eq":"h"}}}"#, #"{"g":[]}"#))
        #expect(try !matches(#"{"g":{"$allMatch":{"$eq":"h"}}}"#, #"{"g":"h"}"#))
    }

    @Test func keyMapMatchTestsTheKeysOfAnObject() throws {
        let doc = #"{"cameras":{"fujifilm":"x","nikon":"z"}}"#
        #expect(try matches(#"{"cameras":{"$keyMapMatch":{"$eq":"nikon"}}}"#, doc))
        #expect(try matches(#"{"cameras":{"$keyMapMatch":{"$beginsWith":"fuji"}}}"#, doc))
        #expect(try !matches(#"{"cameras":{"$keyMapMatch":{"$eq":"canon"}}}"#, doc))
        #expect(try !matches(#"{"cameras":{"$keyMapMatch":{"$eq":"x"}}}"#, #"{"cameras":["x"]}"#))
    }

    @Test func negatedElemMatchStillRequiresTheField() throws {
        #expect(try matches(#"{"$not":{"s":{"$elemMatch":{"$gt":5}}}}"#, #"{"s":[1,2]}"#))
        #expect(try !matches(#"{"$not":{"s":{"$elemMatch":{"$gt":5}}}}"#, #"{"s":[1,9]}"#))
        #expect(try !matches(#"{"$not":{"s":{"$elemMatch":{"$gt":5}}}}"#, #"{}"#))
    }

    @Test func sizeMatchesArrayLength() throws {
        #expect(try matches(#"{"a":{"$size":2}}"#, #"{"a":[1,2]}"#))
        #expect(try !matches(#"{"a":{"$size":3}}"#, #"{"a":[1,2]}"#))
        #expect(try !matches(#"{"a":{"$size":2}}"#, #"{"a":"ab"}"#))
    }

    // MARK: Other condition operators

    @Test func typeNamesTheJSONType() throws {
        let doc = #"{"n":null,"b":false,"i":1,"d":1.5,"s":"x","a":[],"o":{}}"#
        let types = ["n": "null", "b": "boolean", "i": "number", "d": "number", "s": "string", "a": "array",
                     "o": "object"]
        for (field, type) in types {
            #expect(try matches(#"{"\#(field)":{"$type":"\#(type)"}}"#, doc), "\(field) is \(type)")
            #expect(try !matches(#"{"\#(field)":{"$type":"integer"}}"#, doc))
        }
    }

    @Test func modMatchesIntegersWithTruncatingRemainder() throws {
        #expect(try matches(#"{"n":{"$mod":[3,1]}}"#, #"{"n":7}"#))
        #expect(try !matches(#"{"n":{"$mod":[3,2]}}"#, #"{"n":7}"#))
        #expect(try matches(#"{"n":{"$mod":[3,-1]}}"#, #"{"n":-7}"#))
        #expect(try !matches(#"{"n":{"$mod":[3,1]}}"#, #"{"n":7.0}"#))
        #expect(try !matches(#"{"n":{"$mod":[3,1]}}"#, #"{"n":"7"}"#))
    }

    @Test func regexSearchesStringsUnanchored() throws {
        #expect(try matches(#"{"s":{"$regex":"^A.c"}}"#, #"{"s":"Abcd"}"#))
        #expect(try matches(#"{"s":{"$regex":"cd"}}"#, #"{"s":"Abcd"}"#))
        #expect(try matches(#"{"s":{"$regex":"(?i)^abc"}}"#, #"{"s":"ABCD"}"#))
        #expect(try !matches(#"{"s":{"$regex":"^b"}}"#, #"{"s":"Abcd"}"#))
        #expect(try !matches(#"{"s":{"$regex":"1"}}"#, #"{"s":1}"#))
    }

    @Test func beginsWithMatchesStringPrefixes() throws {
        #expect(try matches(#"{"s":{"$beginsWith":"ab"}}"#, #"{"s":"abc"}"#))
        #expect(try matches(#"{"s":{"$beginsWith":""}}"#, #"{"s":"abc"}"#))
        #expect(try !matches(#"{"s":{"$beginsWith":"bc"}}"#, #"{"s":"abc"}"#))
        #expect(try !matches(#"{"s":{"$beginsWith":"1"}}"#, #"{"s":12}"#))
    }

    @Test func aCompiledSelectorIsReusableAcrossDocuments() throws {
        let selector = try MangoSelector(["age": ["$gte": 18], "name": ["$regex": "^[A-Z]"]])
        let documents: [JSON] = [["age": 20, "name": "Ann"], ["age": 10, "name": "Bo"], ["age": 30, "name": "cy"]]
        #expect(documents.map(selector.matches) == [true, false, false])
    }

    @Test func aSelectorCanBeSharedAcrossConcurrentTasks() async throws {
        let selector = try MangoSelector(["name": ["$regex": "^a+b$"], "n": ["$in": [1, 2]]])
        let results = await withTaskGroup(of: Bool.self) { group in
            for i in 0..<8 {
                group.addTask { selector.matches(["name": .string(String(repeating: "a", count: i + 1) + "b"), "n": 2]) }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: true, count: 8))
    }

    // MARK: Invalid selectors

    @Test func unknownOperatorIsRejected() {
        #expect(rejection(#"{"a":{"$foo":1}}"#) == "Invalid operator: $foo")
        #expect(rejection(#"{"$foo":[]}"#) == "Invalid operator: $foo")
        #expect(rejection(#"{"a":{"$where":"x"}}"#) == "Unsupported operator: $where")
    }

    @Test func selectorMustBeAnObject() {
        #expect(rejection(#"[1]"#) == "Selector must be a JSON object, not: [1]")
        #expect(rejection(#""x""#) != nil)
    }

    @Test func operatorsWithTheWrongArgumentTypeAreRejected() {
        #expect(rejection(#"{"$and":{"a":1}}"#) == #"Bad argument for operator $and: {"a":1}"#)
        let bad = [
            #"{"$or":1}"#, #"{"$nor":"x"}"#, #"{"$not":[1]}"#, #"{"a":{"$not":1}}"#,
            #"{"a":{"$in":1}}"#, #"{"a":{"$nin":"x"}}"#, #"{"a":{"$all":{}}}"#,
            #"{"a":{"$exists":"yes"}}"#, #"{"a":{"$type":1}}"#,
            #"{"a":{"$size":-1}}"#, #"{"a":{"$size":1.5}}"#,
            #"{"a":{"$mod":[3]}}"#, #"{"a":{"$mod":[3.5,1]}}"#, #"{"a":{"$mod":[0,1]}}"#,
            #"{"a":{"$elemMatch":[1]}}"#, #"{"a":{"$allMatch":1}}"#, #"{"a":{"$keyMapMatch":"k"}}"#,
        ]
        for selector in bad {
            #expect(rejection(selector)?.hasPrefix("Bad argument for operator $") == true, "\(selector)")
        }
        // CouchDB has no `$regex` or `$beginsWith` of a non-string: an invalid operator, not a bad argument.
        #expect(rejection(#"{"a":{"$regex":1}}"#) == "Invalid operator: $regex")
        #expect(rejection(#"{"a":{"$beginsWith":1}}"#) == "Invalid operator: $beginsWith")
    }

    @Test func invalidRegexIsRejectedAtInit() {
        #expect(rejection(#"{"a":{"$regex":"(unclosed"}}"#) == "Bad argument for operator $regex: \"(unclosed\"")
    }

    @Test func conditionWithoutAFieldIsRejected() {
        #expect(rejection(#"{"$gt":1}"#) == "One or more conditions is missing a field name.")
        #expect(rejection(#"{"$not":{"$eq":1}}"#) == "One or more conditions is missing a field name.")
    }

    @Test func emptyFieldNameSegmentsAreRejected() {
        #expect(rejection(#"{"a..b":1}"#) == "Invalid field name: a..b")
        #expect(rejection(#"{"a.":1}"#) != nil)
        #expect(rejection(#"{"":1}"#) != nil)
    }

    /// A field whose name starts with `$`, written escaped, stays a field (not an operator) through `_explain`'s
    /// normalized selector (found by the `mango` fuzz target).
    @Test func escapedDollarFieldsSurviveNormalization() throws {
        let selector = try MangoSelector(try JSON.parse(#"{"\\$or": {"a": 1}}"#))
        let normalized = selector.normalizedJSON
        let again = try MangoSelector(normalized)
        let doc = try JSON.parse(#"{"$or": {"a": 1}}"#)
        #expect(selector.matches(doc))
        #expect(again.matches(doc))
        #expect(!again.matches(try JSON.parse(#"{"$or": {"a": 2}}"#)))
    }
}
