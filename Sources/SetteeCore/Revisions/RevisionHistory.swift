extension RevID {
    /// The largest generation a revision id can carry: ``RevID/init(_:)`` reads at most 18 digits, so a larger
    /// generation would make an id that cannot be parsed back.
    public static let maximumGeneration = 999_999_999_999_999_999

    /// CouchDB's `_revisions` member, `{"start": N, "ids": [newest, …]}`, → revision ids newest first:
    /// `N-ids[0]`, `(N-1)-ids[1]`, ….
    ///
    /// `start` must be an integer (an integral double is accepted) from 1 to ``maximumGeneration``, `ids` a
    /// non-empty array of at most `start` digests, each a valid revision digest (non-empty printable ASCII
    /// without spaces or quotes). Other members are ignored.
    ///
    /// - Throws: ``SetteeError`` `.badRequest`.
    public static func history(fromRevisions value: JSON) throws(SetteeError) -> [RevID] {
        guard case .object(let o) = value, let start = o["start"]?.intValue, start >= 1,
              start <= Int64(maximumGeneration),
              let ids = o["ids"]?.arrayValue, !ids.isEmpty, Int64(ids.count) <= start
        else { throw SetteeError(.badRequest, "Invalid _revisions: expected {\"start\": N, \"ids\": [...]}") }
        var history: [RevID] = []
        history.reserveCapacity(ids.count)
        for (i, id) in ids.enumerated() {
            guard let digest = id.stringValue, !digest.isEmpty, RevID("1-" + digest) != nil else {
                throw SetteeError(.badRequest, "Invalid revision id in _revisions")
            }
            history.append(RevID(generation: Int(start) - i, digest: digest))
        }
        return history
    }
}
