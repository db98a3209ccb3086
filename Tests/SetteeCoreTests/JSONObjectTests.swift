import Testing
@testable import SetteeCore

@Suite struct JSONObjectTests {
    @Test func settingANewKeyAppendsIt() {
        var object: JSONObject = ["b": 1, "a": 2]
        object["c"] = 3
        #expect(object.keys == ["b", "a", "c"])
    }

    @Test func settingAnExistingKeyKeepsItsPosition() {
        var object: JSONObject = ["b": 1, "a": 2, "c": 3]
        object["a"] = "new"
        #expect(object.keys == ["b", "a", "c"])
        #expect(object["a"] == "new")
    }

    @Test func settingNilRemovesTheKey() {
        var object: JSONObject = ["b": 1, "a": 2, "c": 3]
        object["a"] = nil
        #expect(object.keys == ["b", "c"])
        #expect(object.removeValue(forKey: "b") == .int(1))
        #expect(object.removeValue(forKey: "missing") == nil)
        #expect(object.keys == ["c"])
        #expect(!object.contains(key: "a"))
        #expect(object.contains(key: "c"))
    }

    @Test func initFromPairsKeepsFirstPositionAndLastValue() {
        let object = JSONObject([("x", 1), ("y", 2), ("x", 3)])
        #expect(object.keys == ["x", "y"])
        #expect(object["x"] == .int(3))
        #expect(object.count == 2)
        #expect(!object.isEmpty)
        #expect(JSONObject().isEmpty)
    }

    @Test func iteratesMembersInOrder() {
        let object: JSONObject = ["b": 1, "a": 2]
        #expect(object.map(\.key) == ["b", "a"])
        #expect(object.map(\.value) == [1, 2])
        #expect(object[0].key == "b")
        #expect(object[1].value == .int(2))
    }

    @Test func equalityIgnoresKeyOrder() {
        let one: JSONObject = ["a": 1, "b": ["c": 2, "d": 3]]
        let two: JSONObject = ["b": ["d": 3, "c": 2], "a": 1]
        #expect(one == two)
        #expect(one.hashValue == two.hashValue)
        #expect(JSON.object(one) == JSON.object(two))
        #expect(Set([JSON.object(one), JSON.object(two)]).count == 1)
    }

    @Test func equalityStillComparesKeysAndValues() {
        let base: JSONObject = ["a": 1, "b": 2]
        #expect(base != ["a": 1, "b": 3])
        #expect(base != ["a": 1, "c": 2])
        #expect(base != ["a": 1])
        #expect(base != ["a": 1, "b": 2, "c": 3])
        #expect(JSON.int(1) != JSON.double(1))
    }

    @Test func largeObjectsLookUpAndMutateCorrectly() {
        var object = JSONObject()
        for i in 0..<100 { object["k\(i)"] = .int(Int64(i)) }
        #expect(object.count == 100)
        #expect(object["k57"] == .int(57))
        object["k10"] = nil
        #expect(object["k10"] == nil)
        #expect(object["k11"] == .int(11))
        #expect(object.keys[10] == "k11")
        object["k11"] = "changed"
        #expect(object.keys[10] == "k11")
        for i in 0..<95 where i != 10 { object["k\(i)"] = nil }
        #expect(object.keys == ["k95", "k96", "k97", "k98", "k99"])
        #expect(object["k97"] == .int(97))
        var reversed = JSONObject()
        for i in (95..<100).reversed() { reversed["k\(i)"] = .int(Int64(i)) }
        #expect(object == reversed)
    }

    @Test func accessorsOnJSON() {
        let json: JSON = ["s": "x", "i": 3, "d": 2.0, "f": 2.5, "b": true, "a": [1], "o": [:], "n": nil]
        #expect(json["s"]?.stringValue == "x")
        #expect(json["i"]?.intValue == 3)
        #expect(json["d"]?.intValue == 2)
        #expect(json["f"]?.intValue == nil)
        #expect(JSON.double(1e30).intValue == nil)
        #expect(json["i"]?.doubleValue == 3.0)
        #expect(json["f"]?.doubleValue == 2.5)
        #expect(json["b"]?.boolValue == true)
        #expect(json["a"]?.arrayValue == [1])
        #expect(json["a"]?[0] == 1)
        #expect(json["a"]?[1] == nil)
        #expect(json["a"]?[-1] == nil)
        #expect(json["o"]?.objectValue == JSONObject())
        #expect(json["n"]?.isNull == true)
        #expect(json["missing"] == nil)
        #expect(json["s"]?["x"] == nil)
        #expect(json["s"]?.intValue == nil)
        #expect(json[0] == nil)
    }
}
