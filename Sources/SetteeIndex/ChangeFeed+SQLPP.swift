import SetteeCore
import SetteeSQLPP
import SetteeStore

extension ChangeFeed.Change {
    /// The change as the SQL++ evaluator sees a document.
    func document(body: JSON) -> SourceDocument {
        SourceDocument(id: docID, sequence: UInt64(seq), revisionID: revisionID, body: body)
    }
}
