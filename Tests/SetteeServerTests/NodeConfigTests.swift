import Foundation
import HTTPTypes
import SetteeCore
import Testing

@testable import SetteeServer

@Suite("Node config API")
struct NodeConfigTests {
    static let noPersist: HTTPFields = [HTTPField.Name("X-Couch-Persist")!: "false"]

    @Test func membershipNamesTheNodeAndConfigAnswersUnderItsNameAndLocal() async throws {
        try await withServer { c in
            let m = try await c.get("/_membership")
            #expect(m.status == .ok)
            #expect(m["all_nodes"] == ["settee@127.0.0.1"])
            #expect(m["cluster_nodes"] == ["settee@127.0.0.1"])
            for node in ["_local", "settee@127.0.0.1"] {
                let all = try await c.get("/_node/\(node)/_config")
                #expect(all.status == .ok)
                #expect(all["couchdb"]?["database_dir"]?.stringValue == c.node.configuration.dataDirectory)
                #expect(all["chttpd"]?["port"] != nil)
            }
            expectError(try await c.get("/_node/other@host/_config"), .notFound, "not_found")
        }
    }

    @Test func putAnswersTheOldValueGetAndDeleteFollow() async throws {
        try await withServer { c in
            #expect(try await c.put("/_node/_local/_config/test/foo", #""bar""#).json == "")
            #expect(try await c.get("/_node/_local/_config/test/foo").json == "bar")
            #expect(try await c.get("/_node/_local/_config/test")["foo"] == "bar")
            #expect(try await c.put("/_node/_local/_config/test/foo", #""baz""#).json == "bar")
            #expect(try await c.delete("/_node/_local/_config/test/foo").json == "baz")
            expectError(try await c.get("/_node/_local/_config/test/foo"), .notFound, "not_found")
            expectError(try await c.delete("/_node/_local/_config/test/foo"), .notFound, "not_found")
            for value in ["true", "11", "{}", #"{"a": [1]}"#] {
                expectError(try await c.put("/_node/_local/_config/a/b", value), .badRequest, "bad_request")
            }
            expectError(try await c.put("/_node/_local/_config/query_servers/js", #""x""#), .forbidden, "forbidden")
        }
    }

    @Test func changesPersistInLocalIniUnlessToldNotTo() async throws {
        let dir = TempDataDir()
        let node = try makeNode(dir: dir)
        try await withServer(node: node) { c in
            _ = try await c.put("/_node/_local/_config/test/kept", #""yes""#)
            _ = try await c.put("/_node/_local/_config/test/transient", #""no""#, headers: Self.noPersist)
            _ = try await c.put("/_node/_local/_config/couchdb/max_document_size", #""100""#)
        }
        node.closeAll()
        let again = try makeNode(dir: dir)
        try await withServer(node: again) { c in
            #expect(try await c.get("/_node/_local/_config/test/kept").json == "yes")
            expectError(try await c.get("/_node/_local/_config/test/transient"), .notFound, "not_found")
            // A persisted change applies after a restart too.
            #expect(c.node.configuration.maxDocumentSize == 100)
            try await c.createDB("db")
            let big = try await c.put("/db/doc", #"{"text": "\#(String(repeating: "x", count: 200))"}"#)
            #expect(big.status == .contentTooLarge)
            // Deleting it restores the start-up value.
            _ = try await c.delete("/_node/_local/_config/couchdb/max_document_size")
            #expect(c.node.configuration.maxDocumentSize == 8 << 20)
            #expect(try await c.put("/db/doc", #"{"text": "\#(String(repeating: "x", count: 200))"}"#).status == .created)
        }
        again.closeAll()
    }

    @Test func settingsApplyLiveWithoutARestart() async throws {
        try await withServer { c in
            _ = try await c.put("/_node/_local/_config/uuids/algorithm", #""utc_id""#, headers: Self.noPersist)
            _ = try await c.put("/_node/_local/_config/uuids/utc_id_suffix", #""frog""#, headers: Self.noPersist)
            let ids = try #require(try await c.get("/_uuids?count=3")["uuids"]?.arrayValue)
            for id in ids {
                let text = try #require(id.stringValue)
                #expect(text.count == 18 && text.hasSuffix("frog"))
            }
            _ = try await c.put("/_node/_local/_config/uuids/algorithm", #""sequential""#, headers: Self.noPersist)
            let seq = try #require(try await c.get("/_uuids?count=5")["uuids"]?.arrayValue?.compactMap(\.stringValue))
            #expect(seq == seq.sorted())
            #expect(Set(seq.map { $0.prefix(26) }).count == 1)
            _ = try await c.put("/_node/_local/_config/chttpd/max_http_request_size", #""64""#, headers: Self.noPersist)
            try await c.createDB("db")
            let tooLarge = try await c.post("/db/_bulk_docs", #"{"docs": [{"text": "\#(String(repeating: "y", count: 100))"}]}"#)
            #expect(tooLarge.status == .contentTooLarge)
        }
    }

    @Test func adminsSetThroughTheAPIAreStoredHashedAndCanSignIn() async throws {
        try await withServer(admin: true) { c in
            let auth: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password)]
            let shown = try await c.get("/_node/_local/_config/admins", headers: auth)
            #expect(shown[testAdmin.username]?.stringValue?.hasPrefix("-pbkdf2:sha256-") == true)
            _ = try await c.put("/_node/_local/_config/chttpd_auth/iterations", #""1000""#, headers: auth)
            #expect(try await c.put("/_node/_local/_config/admins/second", #""pass2""#, headers: auth).status == .ok)
            let stored = try await c.get("/_node/_local/_config/admins/second", headers: auth).json.stringValue ?? ""
            #expect(stored.hasPrefix("-pbkdf2:sha256-") && stored.hasSuffix(",1000") && !stored.contains("pass2"))
            let session = try await c.get("/_session", headers: [.authorization: basicAuth("second", "pass2")])
            #expect(session["userCtx"]?["roles"] == ["_admin"])
            #expect(try await c.get("/_all_dbs", headers: [.authorization: basicAuth("second", "wrong")]).status == .unauthorized)
            // Non-admins can't read or change the config.
            #expect(try await c.get("/_node/_local/_config").status == .unauthorized)
            _ = try await c.delete("/_node/_local/_config/admins/second", headers: auth)
            #expect(try await c.get("/_all_dbs", headers: [.authorization: basicAuth("second", "pass2")]).status == .unauthorized)
        }
    }

    @Test func whitelistLimitsWhatTheAPIMayChange() {
        let list = "[{chttpd,config_whitelist}, these, {are}, {nOt, 2, tuples}, {test,foo}, {\"s\",\"k\"}, {<<\"b\">>,<<\"c\">>}]"
        #expect(NodeConfig.whitelistAllows(list, section: "test", key: "foo"))
        #expect(NodeConfig.whitelistAllows(list, section: "s", key: "k"))
        #expect(NodeConfig.whitelistAllows(list, section: "b", key: "c"))
        #expect(!NodeConfig.whitelistAllows(list, section: "test", key: "bar"))
        // Not a list: ignored.
        #expect(NodeConfig.whitelistAllows("!This is an invalid Erlang term!", section: "test", key: "bar"))
        #expect(NodeConfig.whitelistAllows("{[yes, a_valid_erlang_term, not_a_list]}", section: "test", key: "bar"))
        #expect(NodeConfig.whitelistAllows("[{chttpd,config_whitelist}, {test,foo}", section: "x", key: "y"))
    }

    @Test func iniFilesRoundTrip() {
        let parsed = NodeConfig.parseINI("; comment\n[a]\nk = v\nempty =\n[b]\nx=1 = 2\n")
        #expect(parsed["a"]?["k"] == .some("v"))
        #expect(parsed["a"]?["empty"] == .some(nil))
        #expect(parsed["b"]?["x"] == .some("1 = 2"))
    }

    @Test func statsAndSystemHaveCouchDBsShapes() async throws {
        try await withServer { c in
            _ = try await c.get("/")
            let stats = try await c.get("/_node/_local/_stats")
            #expect(stats["couchdb"]?["httpd_request_methods"]?["GET"]?["value"]?.intValue ?? 0 >= 1)
            #expect(try await c.get("/_node/_local/_stats/couchdb/auth_cache_hits")["type"] == "counter")
            let system = try await c.get("/_node/_local/_system")
            #expect(system["uptime"]?.intValue != nil)
            #expect(system["memory"]?["processes"]?.intValue ?? 0 > 0)
        }
    }

    /// `[couch_peruser]`: turned on through the config API, each user of `_users` gets `userdb-<hex name>` with the
    /// user among its admins and members; a deleted user is taken out of it, or (with `delete_dbs`) it is deleted.
    @Test func perUserDatabasesFollowTheUsersDatabase() async throws {
        try await withServer { c in
            func eventually(_ condition: () async throws -> Bool) async throws -> Bool {
                for _ in 0..<200 {
                    if try await condition() { return true }
                    try await Task.sleep(for: .milliseconds(25))
                }
                return false
            }
            func user(_ name: String) async throws -> String {
                let r = try await c.put("/_users/org.couchdb.user:\(name)", #"{"name": "\#(name)", "password": "pw", "roles": [], "type": "user"}"#)
                #expect(r.status == .created)
                return r["rev"]?.stringValue ?? ""
            }
            #expect(PerUserDatabases.databaseName(prefix: "userdb-", user: "alice") == "userdb-616c696365")
            #expect(PerUserDatabases.databaseName(prefix: "userdb-", user: "\u{0A}é") == "userdb-ac3a9")
            #expect(try await c.get("/_node/_local/_config/couch_peruser/enable").json == "false")
            let alice = try await user("alice")
            try await Task.sleep(for: .milliseconds(200))
            #expect(try await c.get("/userdb-616c696365").status == .notFound, "off by default")

            #expect(try await c.put("/_node/_local/_config/couch_peruser/enable", #""true""#, headers: Self.noPersist).status == .ok)
            #expect(try await eventually { try await c.get("/userdb-616c696365").status == .ok })
            #expect(try await eventually {
                let security = try await c.get("/userdb-616c696365/_security")
                return security["admins"]?["names"] == ["alice"] && security["members"]?["names"] == ["alice"]
                    && security["admins"]?["roles"] == ["_admin"]
            })
            _ = try await user("bob")
            #expect(try await eventually { try await c.get("/userdb-626f62").status == .ok })

            // Deleted without delete_dbs: the data stays, the user loses access.
            #expect(try await c.delete("/_users/org.couchdb.user:alice?rev=\(alice)").status == .ok)
            #expect(try await eventually {
                let security = try await c.get("/userdb-616c696365/_security")
                return security["admins"]?["names"] == [] && security["members"]?["names"] == []
            })
            #expect(try await c.get("/userdb-616c696365").status == .ok)

            // With delete_dbs, deleting the user deletes the database.
            #expect(try await c.put("/_node/_local/_config/couch_peruser/delete_dbs", #""true""#, headers: Self.noPersist).status == .ok)
            let bob = try await c.get("/_users/org.couchdb.user:bob")["_rev"]?.stringValue ?? ""
            #expect(try await c.delete("/_users/org.couchdb.user:bob?rev=\(bob)").status == .ok)
            #expect(try await eventually { try await c.get("/userdb-626f62").status == .notFound })

            // Another prefix, and off again: new users get nothing.
            #expect(try await c.put("/_node/_local/_config/couch_peruser/database_prefix", #""private-""#, headers: Self.noPersist).status == .ok)
            _ = try await user("carol")
            #expect(try await eventually { try await c.get("/private-6361726f6c").status == .ok })
            #expect(try await c.put("/_node/_local/_config/couch_peruser/enable", #""false""#, headers: Self.noPersist).status == .ok)
            _ = try await user("dave")
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await c.get("/private-64617665").status == .notFound)
        }
    }
}
