import Foundation
import Testing
import Settee

/// Couchbase Lite's "Documents" guide (Swift), its snippets as written there, run against Settee.
@Suite struct DocumentSnippetTests {
    @Test func persistAndMutateADocument() throws {
        let s = try SnippetDatabase()
        let collection = s.collection

        // Example 1. Persist a document
        let newTask = MutableDocument()
            .setString("task", forKey: "type")
            .setString("todo", forKey: "owner")
            .setDate(Date(), forKey: "createdAt")
        try collection.save(document: newTask)

        // Example 2. Make a mutable document
        guard let document = try collection.document(id: newTask.id) else { Issue.record("not saved"); return }
        let mutableDocument = document.toMutable()
        mutableDocument.setString("apples", forKey: "name")
        try collection.save(document: mutableDocument)

        let read = try #require(try collection.document(id: newTask.id))
        #expect(read.string(forKey: "name") == "apples")
        #expect(read.string(forKey: "owner") == "todo")
        let created = try #require(read.date(forKey: "createdAt"))
        #expect(abs(created.timeIntervalSinceNow) < 60)
        // Dates are stored as ISO-8601 text with milliseconds, in UTC.
        #expect(read.string(forKey: "createdAt")?.hasSuffix("Z") == true)
        #expect(read.revisionID?.hasPrefix("2-") == true)
    }

    @Test func dictionaries() throws {
        let s = try SnippetDatabase()
        let collection = s.collection
        try collection.save(document: MutableDocument(id: "doc1", data: ["address": ["street": "1 Main st.", "city": "San Francisco"]]))

        // Read a dictionary
        let document = try collection.document(id: "doc1")
        // Getting a dictionary from the document's properties
        let dict = document?.dictionary(forKey: "address")
        // Access a value with a key from the dictionary
        let street = dict?.string(forKey: "street")
        // Iterate dictionary
        var seen: [String] = []
        for key in dict!.keys {
            print("Key \(key) = \(dict!.value(forKey: key)!)")
            seen.append(key)
        }
        // Create a mutable copy
        let mutableDict = dict!.toMutable()
        #expect(street == "1 Main st.")
        #expect(seen.sorted() == ["city", "street"])
        #expect(mutableDict.count == 2)

        // Create a new mutable dictionary and populate some keys/values
        let newDict = MutableDictionaryObject()
        newDict.setString("1 Main st.", forKey: "street")
        newDict.setString("San Francisco", forKey: "city")
        // Add the dictionary to a document's properties and save the document
        let mutableDoc = MutableDocument(id: "doc2")
        mutableDoc.setDictionary(newDict, forKey: "address")
        try collection.save(document: mutableDoc)
        #expect(try collection.document(id: "doc2")?.dictionary(forKey: "address")?.string(forKey: "city") == "San Francisco")
    }

    @Test func arrays() throws {
        let s = try SnippetDatabase()
        let collection = s.collection
        try collection.save(document: MutableDocument(id: "doc1", data: ["phones": ["650-000-0000", "650-000-0001"]]))

        let document = try collection.document(id: "doc1")
        // Getting a phones array from the document's properties
        let array = document?.array(forKey: "phones")
        // Get element count
        let count = array?.count
        // Access an array element by index
        if count! >= 0 { let phone = array?[1]; #expect(phone?.string == "650-000-0001") }
        // Iterate array
        var items: [String] = []
        for (index, element) in array!.enumerated() {
            print("Item \(index) = \(element)")
            items.append(element as! String)
        }
        // Create a mutable copy
        let mutableArray = array!.toMutable()
        #expect(items == ["650-000-0000", "650-000-0001"])
        #expect(mutableArray.count == 2)

        let phones = MutableArrayObject()
        phones.addString("650-000-0000")
        phones.addString("650-000-0001")
        let mutableDoc = MutableDocument(id: "doc2")
        mutableDoc.setArray(phones, forKey: "phones")
        try collection.save(document: mutableDoc)
        #expect(try collection.document(id: "doc2")?.array(forKey: "phones")?.string(at: 0) == "650-000-0000")
    }

    @Test func nestedValuesAreEditedInPlace() throws {
        let s = try SnippetDatabase()
        let collection = s.collection
        let doc = MutableDocument(id: "hotel")
            .setValue(["name": "Grand", "address": ["city": "Paris", "zip": "75001"], "tags": ["pool"]], forKey: "info")
        // Through the mutable containers the document hands out …
        doc.dictionary(forKey: "info")?.dictionary(forKey: "address")?.setString("Lyon", forKey: "city")
        doc.dictionary(forKey: "info")?.array(forKey: "tags")?.addString("spa").insertString("gym", at: 0)
        // … and through fragments.
        doc["info"]["address"]["zip"].string = "69001"
        doc["rating"].int = 4
        doc["info"]["missing"]["x"].value = 1  // a path that leads nowhere changes nothing
        try collection.save(document: doc)

        let read = try #require(try collection.document(id: "hotel"))
        #expect(read["info"]["address"]["city"].string == "Lyon")
        #expect(read["info"]["address"]["zip"].string == "69001")
        #expect(read["info"]["tags"].array?.toArray() as? [String] == ["gym", "pool", "spa"])
        #expect(read["info"]["tags"][2].string == "spa")
        #expect(read["rating"].int == 4)
        #expect(read["info"]["missing"].exists == false)
        #expect(read["nothing"]["deeper"][3].string == nil)
        #expect(read.dictionary(forKey: "info")?.contains(key: "missing") == false)

        // A mutable container set on a document stays shared with it, as in Couchbase Lite.
        let address = MutableDictionaryObject(data: ["city": "Nice"])
        let other = MutableDocument(id: "other").setDictionary(address, forKey: "address")
        address.setString("Cannes", forKey: "city")
        #expect(other["address"]["city"].string == "Cannes")
    }

    @Test func typedGettersFollowCouchbaseLite() throws {
        let doc = MutableDocument(id: "t")
            .setInt(7, forKey: "int").setDouble(2.75, forKey: "double").setBoolean(true, forKey: "bool")
            .setString("text", forKey: "string").setValue(nil, forKey: "null").setFloat(1.5, forKey: "float")
            .setInt64(Int64.max, forKey: "int64").setNumber(NSNumber(value: 3), forKey: "number")
        #expect(doc.int(forKey: "double") == 2)          // truncated
        #expect(doc.double(forKey: "int") == 7)
        #expect(doc.int(forKey: "bool") == 1)
        #expect(doc.int(forKey: "string") == 0)
        #expect(doc.int64(forKey: "int64") == Int64.max)
        #expect(doc.float(forKey: "float") == 1.5)
        #expect(doc.number(forKey: "number")?.intValue == 3)
        #expect(doc.number(forKey: "string") == nil)
        #expect(doc.boolean(forKey: "int") && doc.boolean(forKey: "string") && !doc.boolean(forKey: "null"))
        #expect(doc.value(forKey: "null") == nil && doc.contains(key: "null"))
        #expect(doc.value(forKey: "int") as? Int == 7)
        #expect(doc.value(forKey: "string") as? String == "text")
        #expect(doc.toDictionary()["null"] is NSNull)
        #expect(doc.count == 8)
        #expect(doc.date(forKey: "string") == nil)
        let when = Date(timeIntervalSince1970: 1_700_000_000.25)
        doc.setDate(when, forKey: "when")
        #expect(doc.string(forKey: "when") == "2023-11-14T22:13:20.250Z")
        #expect(doc.date(forKey: "when") == when)
        doc.removeValue(forKey: "when")
        #expect(!doc.contains(key: "when"))
    }

    @Test func json() throws {
        let s = try SnippetDatabase()
        let collection = s.collection
        let mutableDoc = try MutableDocument(id: "hotel123", json: #"{"name":"Hotel Ghia","city":"Paris","rooms":[1,2]}"#)
        try collection.save(document: mutableDoc)
        let doc = try collection.document(id: "hotel123")
        let json = doc!.toJSON()
        #expect(json == #"{"name":"Hotel Ghia","city":"Paris","rooms":[1,2]}"#)
        let dict = try MutableDictionaryObject(json: #"{"a":1}"#)
        let array = try MutableArrayObject(json: #"[1,"two",{"three":3}]"#)
        #expect(dict.int(forKey: "a") == 1)
        #expect(array.dictionary(at: 2)?.int(forKey: "three") == 3)
        #expect(throws: SetteeError.self) { try MutableDocument(id: "x", json: "[1]") }
        #expect(throws: SetteeError.self) { try MutableArrayObject(json: "{") }
    }

    @Test func equalityIsByContent() throws {
        let a = MutableDictionaryObject(data: ["x": 1, "y": ["z": true]])
        let b = try MutableDictionaryObject(json: #"{"y":{"z":true},"x":1}"#)
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(MutableArrayObject(data: [1, "a"]) == MutableArrayObject().addInt(1).addString("a"))
        #expect(a != MutableDictionaryObject(data: ["x": 2]))
    }
}
