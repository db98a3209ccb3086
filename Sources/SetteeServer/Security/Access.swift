import Foundation
import SetteeCore

/// Who the caller is: a name (nil when anonymous) and roles; server admins carry the `_admin` role.
struct UserContext: Sendable, Equatable {
    var name: String?
    var roles: [String]
    /// How the caller authenticated: `default` (basic), `cookie`, `jwt`, or nil when anonymous.
    var method: String?

    static let anonymous = UserContext(name: nil, roles: [], method: nil)
    var isServerAdmin: Bool { roles.contains("_admin") }
    var json: JSON {
        ["name": name.map(JSON.string) ?? .null, "roles": .array(roles.map(JSON.string))]
    }
}

/// What a caller may do in one database, from the database's `_security` object, in increasing order.
enum Access: Int, Comparable, Sendable {
    /// Nothing: not a member (401 when anonymous, 403 otherwise).
    case none
    /// Read documents, changes, views and queries; write only `_local` checkpoint documents. A Settee extension
    /// (`_security.readers`), for read-only replication clients.
    case reader
    /// Read and write documents other than design documents (CouchDB's members).
    case member
    /// Also design documents, `_security`, compaction, purge, indexes (CouchDB's database admins).
    case admin

    static func < (a: Access, b: Access) -> Bool { a.rawValue < b.rawValue }
}

/// A database's `_security` object: `admins`, `members` and (Settee's extension) `readers`, each with `names`
/// and `roles`.
struct SecurityObject: Sendable, Equatable {
    struct Section: Sendable, Equatable {
        var names: [String] = []
        var roles: [String] = []
        var isEmpty: Bool { names.isEmpty && roles.isEmpty }

        func includes(_ user: UserContext) -> Bool {
            if let name = user.name, names.contains(name) { return true }
            return user.roles.contains { roles.contains($0) }
        }

        init(names: [String] = [], roles: [String] = []) {
            self.names = names
            self.roles = roles
        }

        init(_ json: JSON?) {
            names = json?["names"]?.arrayValue?.compactMap(\.stringValue) ?? []
            roles = json?["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
        }
    }

    var admins = Section()
    var members = Section()
    var readers = Section()

    /// What a database has before anyone sets `_security` — CouchDB 3's `default_security = admin_only`:
    /// only server admins (role `_admin`) may use it.
    static let adminOnly = SecurityObject(admins: Section(roles: ["_admin"]), members: Section(roles: ["_admin"]))
    /// ``adminOnly`` as CouchDB 3 shows it for a database whose `_security` was never set.
    static let adminOnlyJSON: JSON = ["members": ["roles": ["_admin"]], "admins": ["roles": ["_admin"]]]

    init(admins: Section = Section(), members: Section = Section(), readers: Section = Section()) {
        self.admins = admins
        self.members = members
        self.readers = readers
    }

    init(_ json: JSON) {
        admins = Section(json["admins"])
        members = Section(json["members"])
        readers = Section(json["readers"])
    }

    /// The object as `GET /{db}/_security` shows it.
    var json: JSON {
        func section(_ s: Section) -> JSON { ["names": .array(s.names.map(JSON.string)), "roles": .array(s.roles.map(JSON.string))] }
        var o: JSONObject = ["admins": section(admins), "members": section(members)]
        if !readers.isEmpty { o["readers"] = section(readers) }
        return .object(o)
    }

    /// The caller's access. With no members and no readers the database is public: everyone is a member.
    func access(for user: UserContext) -> Access {
        if user.isServerAdmin || admins.includes(user) { return .admin }
        if members.isEmpty && readers.isEmpty { return .member }
        if members.includes(user) { return .member }
        if readers.includes(user) { return .reader }
        return .none
    }

    /// Validates a `PUT /{db}/_security` body: each of admins/members/readers an object whose names and roles are
    /// arrays of strings.
    static func validate(_ body: JSONObject) throws {
        for key in ["admins", "members", "readers"] {
            guard let section = body[key] else { continue }
            guard case .object(let o) = section else { throw CouchError.badRequest("\(key) must be a JSON object") }
            for list in ["names", "roles"] where o[list] != nil {
                guard let items = o[list]?.arrayValue, items.allSatisfy({ $0.stringValue != nil }) else {
                    throw CouchError.badRequest("\(key).\(list) must be a JSON list of strings")
                }
            }
        }
    }
}
