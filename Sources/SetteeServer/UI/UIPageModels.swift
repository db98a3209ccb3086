/// The models the admin UI's templates render (see ``UIPageContext``): one per page, holding what its template
/// reads. A property's name is the template's variable; an optional left nil is missing (its section is skipped).

// MARK: Sign-in, account, errors

/// The sign-in page (`login`).
struct LoginPage {
    /// Where to go after signing in, encoded for the form's query string.
    let nextEncoded: String
    var name: String?
    var error: String?
}

/// An error page (`error`): the reason, under the status in the title.
struct ErrorPage {
    let error: String
}

/// The signed-in user's page (`account`).
struct AccountPage {
    let name: String
    let roles: String
    /// How the session was authenticated (cookie, basic, …).
    let method: String
    /// A `_users` member, who may change their password here.
    var canChangePassword = false
    /// A server admin from the node's configuration, whose password is set where the node starts.
    var configuredAdmin = false
    var error: String?
}

// MARK: Databases

/// The databases list (`dashboard`), with the node's at-a-glance figures.
struct DashboardPage {
    let databases: [DatabaseRow]
    let count: Int
    let version: String
    let uuid: String
    let glance: [GlanceItem]
    let hasGlance: Bool
    var error: String?
}

/// A database in the databases list.
struct DatabaseRow {
    let name: String
    let href: String
    let docs: String
    let deleted: String
    let size: String
    let seq: String
    /// Why its info could not be read (the user may list it but not open it).
    var dbError: String?
}

/// A database's recent changes (`changes`), which the page's script then follows live.
struct ChangesPage {
    let changes: [ChangeRow]
    /// The event-source feed from the sequence read before the list.
    let feedURL: String
    var error: String?
}

/// A change in the changes list.
struct ChangeRow {
    let seq: String
    let id: String
    let href: String
    let revs: String
    let deleted: Bool
}

/// A database's `_security` object, edited as JSON (`security`).
struct SecurityPage {
    let json: String
    var error: String?
}

// MARK: Documents

/// A page of a database's documents (`documents`).
struct DocumentsPage {
    let rows: [DocumentRow]
    let from: Int
    let to: Int
    let total: String
    var startkey: String?
    var prevHref: String?
    var nextHref: String?
}

/// A document in the documents list.
struct DocumentRow {
    let id: String
    let href: String
    let treeHref: String
    let rev: String
    /// The body without its `_` members, shortened.
    let preview: String
    /// How many conflicts the document has, if any.
    var conflictBadge: String?
}

/// A document's editor (`document`): a new document, an existing one (with its attachments and conflicts), or a
/// missing one.
struct DocumentPage {
    /// The body in the editor.
    var json: String
    var isNew = false
    var isLocal = false
    var id: String?
    var treeHref: String?
    var docHref: String?
    var rev: String?
    var deleted = false
    var attachments: [AttachmentRow] = []
    /// The document's API path, under which the upload form puts attachments.
    var attachmentBase: String?
    var conflicts: [RevisionLink] = []
    var hasDocConflicts = false
    var deletedConflicts: String?
    /// The revision asked for with `?rev=`.
    var viewingRev: String?
    /// Why the document could not be read (it does not exist): the editor then creates it.
    var missing: String?
    var error: String?
}

/// An attachment of a document.
struct AttachmentRow {
    let name: String
    let href: String
    let type: String
    let length: String
    let digest: String
}

// MARK: Revision tree

/// A document's revision tree and conflicts (`tree`).
struct TreePage {
    let id: String
    let docHref: String
    let resolveHref: String
    /// The tree drawn by ``RevisionTreeView``, inserted unescaped.
    let svg: String
    let winner: String
    let hasConflicts: Bool
    let conflictCount: Int
    let revisionCount: Int
    let leaves: [LeafRow]
    /// The live leaves (the winner first) and the members they disagree on.
    var diffRevs: [DiffColumn] = []
    var diffs: [DiffRow] = []
    var hasDiffs = false
    /// The winner's body, to edit into a merged version.
    var mergeJSON: String?
}

/// A leaf of the revision tree: the winner, a conflict or a deleted leaf.
struct LeafRow {
    let rev: String
    let state: String
    let json: String
    let href: String
    /// Whether it may be kept to resolve the conflicts (a live leaf, while there are conflicts).
    let canKeep: Bool
}

/// A live leaf heading the differences table.
struct DiffColumn {
    let rev: String
}

/// A member the live leaves disagree on, with each leaf's value.
struct DiffRow {
    let key: String
    let values: [ValueCell]
}

// MARK: Query, views, indexes

/// The query page (`query`): a SQL++ query with its rows and plan, and the Mango box.
struct QueryPage {
    var q: String
    var params: String
    var mango: String
    var plan: String?
    var error: String?
    var ran = false
    var columns: [NamedItem] = []
    var rows: [QueryRow] = []
    var rowCount = 0
    var truncated = false
    var elapsed = ""
    var json = ""
    var mangoError: String?
    var mangoRan = false
    var mangoDocs: [MangoDoc] = []
    var mangoCount = 0
    var mangoElapsed = ""
    /// The index `_explain` chose (design document / name).
    var mangoIndex: String?
    var mangoWarning: String?
    var mangoBookmark: String?
    var mangoJSON = ""
}

/// A SQL++ result row: one cell per column.
struct QueryRow {
    let cells: [ValueCell]
}

/// A document a Mango query found.
struct MangoDoc {
    let id: String
    /// Its page, or "" for a result without `_id` (a `fields` list without it).
    let docHref: String
    let doc: String
}

/// The views page (`views`): the database's views, the form that runs one, and its rows.
struct ViewsPage {
    let views: [ViewRow]
    let hasViews: Bool
    /// What the form's fields hold (the query parameters as typed).
    let p_key: String
    let p_startkey: String
    let p_endkey: String
    let p_partition: String
    let p_limit: String
    let p_skip: String
    let p_group_level: String
    /// The choice of the form's reduce menu.
    let reduce_default: Bool
    let reduce_true: Bool
    let reduce_false: Bool
    let includeDocs: Bool
    let descending: Bool
    var error: String?
    var viewName: String?
    var ran = false
    var showDocs = false
    var rows: [ViewResultRow] = []
    var rowCount = 0
    var truncated = false
    var totalRows: String?
    var offset: String?
    var elapsed = ""
    var json = ""
}

/// A view of a design document, with its source.
struct ViewRow {
    /// `ddoc/view`, as the form names it.
    let value: String
    let language: String
    let map: String
    let reduce: String
    let selected: Bool
    let href: String
}

/// A row a view returned.
struct ViewResultRow {
    let key: String
    let value: String
    var id: String?
    var docHref: String?
    var doc: String?
}

/// A database's SQL++ indexes and the form that creates one (`indexes`).
struct IndexesPage {
    let indexes: [IndexRow]
    /// The database's update sequence, which an index's `lastSeq` catches up with.
    let updateSeq: Int64
    /// The create form's fields, kept after a failed attempt.
    let form: IndexForm
    var error: String?
}

/// An index in the indexes list.
struct IndexRow {
    let name: String
    let collection: String
    let type: String
    let expressions: String
    let options: String
    let state: String
    let lastSeq: Int64
    let percent: Int
}

/// The fields of the create-index form.
struct IndexForm {
    let name: String
    let expressions: String
    let `where`: String
    let path: String
    let collection: String
    let dimensions: String
    let centroids: String
    let language: String
    let numProbes: String
}

// MARK: Replication and status

/// The replication page (`replication`): `_replicator` jobs, running replications, and the form that starts one.
struct ReplicationPage {
    let jobs: [ReplicationJob]
    let tasks: [ReplicationTask]
    /// The local databases, offered as sources and targets.
    let databases: [NamedItem]
    var error: String?
}

/// A `_replicator` job, from `/_scheduler/docs`.
struct ReplicationJob {
    let docId: String
    let source: String
    let target: String
    let state: String
    let written: String
    let updated: String
    let error: String
}

/// A running replication, from `/_active_tasks`.
struct ReplicationTask {
    let id: String
    let source: String
    let target: String
    let state: String
    let read: String
    let written: String
    let pending: String
    let seq: String
}

/// The metrics page (`metrics`): the at-a-glance figures and every series of `/_metrics`.
struct MetricsPage {
    let glance: [GlanceItem]
    let hasGlance: Bool
    let samples: [MetricSample]
}

/// A Prometheus series and its value.
struct MetricSample {
    let name: String
    let labels: String
    let value: String
}
