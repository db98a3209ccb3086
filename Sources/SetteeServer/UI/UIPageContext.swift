import Mustache

/// What a page's template renders, as one flat Mustache context: the layout's own values (title, who is signed in,
/// the CSRF token, the active tab), the database header on database pages, the page's model, and the flash
/// messages of the URL. A name resolves in that order; a nil optional counts as missing, as in swift-mustache.
struct UIPageContext<Model>: MustacheParent {
    let title: String
    let csrf: String
    let user: String
    let canSignOut: Bool
    let asset: String
    /// Whether the page has the top bar (the sign-in page has not).
    let chrome: Bool
    /// The active tab: `nav_<nav>` is true for the templates.
    let nav: String
    let database: DatabaseHeader?
    let model: Model
    /// `?notice=` and `?error=` of the URL (post/redirect/get), shown unless the model has its own.
    let notice: String?
    let error: String?

    func child(named name: String) -> Any? {
        switch name {
        case "title": return title
        case "csrf": return csrf
        case "user": return user
        case "canSignOut": return canSignOut
        case "asset": return asset
        case "chrome": return chrome
        case "nav_" + nav: return true
        default: break
        }
        if let value = Self.property(name, of: model) { return value }
        if let database, let value = Self.property(name, of: database) { return value }
        switch name {
        case "notice": return notice
        case "error": return error
        default: return nil
        }
    }

    /// A stored property by name, read as swift-mustache reads a struct (through `Mirror`, optionals unwrapped).
    static func property(_ name: String, of value: Any) -> Any? {
        guard let found = Mirror(reflecting: value).children.first(where: { $0.label == name })?.value else { return nil }
        let mirror = Mirror(reflecting: found)
        guard mirror.displayStyle == .optional else { return found }
        return mirror.children.first?.value
    }
}

/// The header of every database page (the `dbnav` partial): the database's name, link, counts, size and update
/// sequence.
struct DatabaseHeader {
    let db: String
    let dbHref: String
    let dbDocs: String
    let dbDeleted: String
    let dbSize: String
    let dbSeq: String
}

/// A one-value table cell or list item (`{{value}}`).
struct ValueCell {
    let value: String
}

/// A named list item: a database, a result column (`{{name}}`).
struct NamedItem {
    let name: String
}

/// A revision with a link to its body (`{{rev}}`, `{{href}}`).
struct RevisionLink {
    let rev: String
    let href: String
}

/// One figure of the node's at-a-glance cards (dashboard and metrics pages).
struct GlanceItem {
    let label: String
    let value: String
}
