import SetteeCore
import SetteeReplication
import SetteeStore

/// Keeps a database's `_security` object in step with the peer's, as the copies of a CouchDB database in one
/// cluster share theirs.
///
/// A `_security` object has no revisions to replicate, so the two copies are merged three ways: each node records,
/// per database and peer, the object the two last agreed on (in the database's `meta` table, which is not
/// replicated). After every replication of a database with the peer (``PeerSync``), the node compares its object,
/// the peer's and the agreed one:
/// - equal: nothing moves (the agreement is recorded if it is new);
/// - only this node's changed since the agreement: it is written to the peer (`PUT /{db}/_security`);
/// - only the peer's changed: it is stored here;
/// - both changed, or no agreement yet (a database just created on one side): an object that is still the default
///   (CouchDB 3's admin-only one) gives way to one that was set; otherwise the one whose canonical JSON sorts last
///   wins on both nodes, so that they agree whichever runs first.
///
/// Setting `_security` on a node is a database event (``Node/setSecurityObject(_:_:)``), so its peers hear of it
/// through `_db_updates` and replicate that database at once.
extension PeerSync {
    /// What a merge decided (returned for tests and logs).
    enum SecurityMerge: Equatable, Sendable {
        case unchanged
        case pushed
        case pulled
    }

    /// The `meta` key under which a database records the object it last agreed on with this peer.
    var agreedSecurityKey: String { "peer-security " + RemoteEndpoint.redact(peer) }

    /// Merges `database`'s `_security` with the peer's (see the type's comment). Throws the peer's refusal or a
    /// transport error; the next replication of the database tries again.
    @discardableResult
    func syncSecurity(_ db: Database, _ remote: RemoteEndpoint) async throws -> SecurityMerge {
        let node = self.node
        let key = agreedSecurityKey
        let (mine, agreed) = try await blocking {
            (try db.metadata("security") ?? SecurityObject.adminOnlyJSON, try db.metadata(key))
        }
        let theirs = JSON.object(try await remote.securityObject())
        let mineBytes = mine.canonicalBytes, theirBytes = theirs.canonicalBytes
        if mineBytes == theirBytes {
            if agreed?.canonicalBytes != mineBytes {
                try await blocking { try db.setMetadata(key, mine) }
            }
            return .unchanged
        }
        let agreedBytes = agreed?.canonicalBytes
        let mineWins: Bool
        if agreedBytes == theirBytes {
            mineWins = true  // only this node's changed
        } else if agreedBytes == mineBytes {
            mineWins = false  // only the peer's changed
        } else {
            let defaultBytes = SecurityObject.adminOnlyJSON.canonicalBytes
            if theirBytes == defaultBytes {
                mineWins = true
            } else if mineBytes == defaultBytes {
                mineWins = false
            } else {
                mineWins = mineBytes.lexicographicallyPrecedes(theirBytes) == false
            }
        }
        if mineWins {
            guard case .object(let object) = mine else { return .unchanged }
            try await remote.setSecurityObject(object)
            try await blocking { try db.setMetadata(key, mine) }
            return .pushed
        }
        guard case .object(let object) = theirs else { return .unchanged }
        try SecurityObject.validate(object)
        let stored = try await blocking { () -> Bool in
            // Not over a change made here meanwhile (a PUT since `mine` was read): that one is merged next time.
            guard (try db.metadata("security") ?? SecurityObject.adminOnlyJSON).canonicalBytes == mineBytes else { return false }
            try node.setSecurityObject(db, object)
            try db.setMetadata(key, theirs)
            return true
        }
        return stored ? .pulled : .unchanged
    }
}
