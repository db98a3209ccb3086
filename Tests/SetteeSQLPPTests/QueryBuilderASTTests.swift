import Testing
import SetteeSQLPP
import SetteeCore
import struct Foundation.Date

/// The QueryBuilder expression API builds the same SQL++ trees the parser does.
@Suite struct QueryBuilderASTTests {
    static func prop(_ keys: String..., from source: String? = nil) -> SQLExpression {
        .property(source: source, path: keys.map(PathComponent.key))
    }

    @Test func comparisonAndArrayContains() {
        let built = Expression.property("type").equalTo(Expression.string("hotel"))
            .and(ArrayFunction.contains(Expression.property("public_likes"), value: Expression.string("Armani")))
        let expected: SQLExpression = .binary(
            .and,
            .binary(.equal, Self.prop("type"), .literal(.string("hotel"))),
            .function("ARRAY_CONTAINS", [Self.prop("public_likes"), .literal(.string("Armani"))], distinct: false))
        #expect(built.sqlExpression == expected)
    }

    @Test func operatorsMapToBinaryNodes() {
        let a = Expression.property("a"), b = Expression.int(2)
        let cases: [(any ExpressionProtocol, BinaryOperator)] = [
            (a.multiply(b), .multiply), (a.divide(b), .divide), (a.modulo(b), .modulo), (a.add(b), .add),
            (a.subtract(b), .subtract), (a.lessThan(b), .less), (a.lessThanOrEqualTo(b), .lessOrEqual),
            (a.greaterThan(b), .greater), (a.greaterThanOrEqualTo(b), .greaterOrEqual), (a.equalTo(b), .equal),
            (a.notEqualTo(b), .notEqual), (a.is(b), .is), (a.isNot(b), .isNot), (a.and(b), .and), (a.or(b), .or),
        ]
        for (built, op) in cases {
            #expect(built.sqlExpression == .binary(op, Self.prop("a"), .literal(.int(2))))
        }
    }

    @Test func predicates() {
        let name = Expression.property("name")
        #expect(name.like(Expression.string("eng%")).sqlExpression
                == .like(Self.prop("name"), pattern: .literal(.string("eng%")), negated: false))
        #expect(name.regex(Expression.string("^E")).sqlExpression
                == .function("REGEXP_LIKE", [Self.prop("name"), .literal(.string("^E"))], distinct: false))
        #expect(name.isValued().sqlExpression == .check(Self.prop("name"), .valued, negated: false))
        #expect(name.isNotValued().sqlExpression == .check(Self.prop("name"), .valued, negated: true))
        #expect(name.between(Expression.int(1), and: Expression.int(5)).sqlExpression
                == .between(Self.prop("name"), low: .literal(.int(1)), high: .literal(.int(5)), negated: false))
        let values = [Expression.property("first"), Expression.property("last")]
        #expect(Expression.string("Armani").in(values).sqlExpression
                == .in(.literal(.string("Armani")), [Self.prop("first"), Self.prop("last")], negated: false))
        #expect(Expression.not(name.isValued()).sqlExpression
                == .not(.check(Self.prop("name"), .valued, negated: false)))
        #expect(Expression.negated(name).sqlExpression == .not(Self.prop("name")))
    }

    @Test func propertyPaths() {
        #expect(Expression.property("geo.alt").sqlExpression == Self.prop("geo", "alt"))
        #expect(Expression.property("tags[0].name").sqlExpression
                == .property(source: nil, path: [.key("tags"), .index(0), .key("name")]))
        #expect(Expression.property("name").from("airline").sqlExpression == Self.prop("name", from: "airline"))
    }

    @Test func allIsStar() {
        #expect(Expression.all().sqlExpression == .star)
        #expect(Function.count(Expression.all()).sqlExpression == .function("COUNT", [.star], distinct: false))
        #expect(Expression.all().from("a").sqlExpression == .property(source: "a", path: []))
    }

    @Test func metaFields() {
        #expect(Meta.id.sqlExpression == .meta(source: nil, field: .id))
        #expect(Meta.id.from("airline").sqlExpression == .meta(source: "airline", field: .id))
        #expect(Meta.sequence.sqlExpression == .meta(source: nil, field: .sequence))
        #expect(Meta.revisionID.sqlExpression == .meta(source: nil, field: .revisionID))
        #expect(Meta.isDeleted.sqlExpression == .meta(source: nil, field: .deleted))
        #expect(Meta.expiration.from("x").sqlExpression == .meta(source: "x", field: .expiration))
        let join = Meta.id.from("airline").equalTo(Expression.property("airlineid").from("route"))
        #expect(join.sqlExpression
                == .binary(.equal, .meta(source: "airline", field: .id), Self.prop("airlineid", from: "route")))
    }

    @Test func literals() {
        #expect(Expression.string("s").sqlExpression == .literal(.string("s")))
        #expect(Expression.string(nil).sqlExpression == .literal(.null))
        #expect(Expression.int(10).sqlExpression == .literal(.int(10)))
        #expect(Expression.int64(-3).sqlExpression == .literal(.int(-3)))
        #expect(Expression.double(0.8).sqlExpression == .literal(.double(0.8)))
        #expect(Expression.float(0.5).sqlExpression == .literal(.double(0.5)))
        #expect(Expression.boolean(true).sqlExpression == .literal(.bool(true)))
        #expect(Expression.number(7).sqlExpression == .literal(.int(7)))
        #expect(Expression.number(2.5).sqlExpression == .literal(.double(2.5)))
        #expect(Expression.parameter("type").sqlExpression == .parameter("type"))
        #expect(Expression.value(nil).sqlExpression == .literal(.null))
        #expect(Expression.value(3).sqlExpression == .literal(.int(3)))
        #expect(Expression.value(false).sqlExpression == .literal(.bool(false)))
        #expect(Expression.value(JSON.array([1, "a"])).sqlExpression == .literal(.array([1, "a"])))
    }

    @Test func arraysAndDictionaries() {
        #expect(Expression.array([1, "x", nil, true]).sqlExpression
                == .array([.literal(.int(1)), .literal(.string("x")), .literal(.null), .literal(.bool(true))]))
        // Keys are sorted; values may be expressions.
        #expect(Expression.dictionary(["photo": Expression.property("photo"), "n": 1]).sqlExpression
                == .object([ObjectMember(key: "n", value: .literal(.int(1))),
                            ObjectMember(key: "photo", value: Self.prop("photo"))]))
        #expect(Expression.value(["a": [1, 2]]).sqlExpression
                == .object([ObjectMember(key: "a", value: .array([.literal(.int(1)), .literal(.int(2))]))]))
    }

    @Test func functions() {
        let x = Expression.property("x")
        #expect(Function.lower(x).sqlExpression == .function("LOWER", [Self.prop("x")], distinct: false))
        #expect(Function.avg(x).sqlExpression == .function("AVG", [Self.prop("x")], distinct: false))
        #expect(Function.round(x).sqlExpression == .function("ROUND", [Self.prop("x")], distinct: false))
        #expect(Function.round(x, digits: Expression.int(2)).sqlExpression
                == .function("ROUND", [Self.prop("x"), .literal(.int(2))], distinct: false))
        // SQL++ ATAN2(a, b) is atan(b / a), so atan2(y:x:) puts x first.
        #expect(Function.atan2(y: Expression.int(1), x: Expression.int(2)).sqlExpression
                == .function("ATAN2", [.literal(.int(2)), .literal(.int(1))], distinct: false))
        #expect(Function.pi().sqlExpression == .function("PI", [], distinct: false))
        #expect(Function.contains(x, substring: Expression.string("a")).sqlExpression
                == .function("CONTAINS", [Self.prop("x"), .literal(.string("a"))], distinct: false))
        #expect(Function.stringToMillis(x).sqlExpression == .function("STR_TO_MILLIS", [Self.prop("x")], distinct: false))
        #expect(Function.millisToUTC(x).sqlExpression == .function("MILLIS_TO_UTC", [Self.prop("x")], distinct: false))
        #expect(ArrayFunction.length(x).sqlExpression == .function("ARRAY_LENGTH", [Self.prop("x")], distinct: false))
    }

    @Test func quantifiedExpressions() {
        let like = ArrayExpression.variable("like")
        let any = ArrayExpression.any(like).in(Expression.property("public_likes"))
            .satisfies(like.equalTo(Expression.string("Armani")))
        #expect(any.sqlExpression == .quantified(.any, variable: "like", in: Self.prop("public_likes"),
                                                 satisfies: .binary(.equal, Self.prop("like"), .literal(.string("Armani")))))

        let v = ArrayExpression.variable("v")
        let every = ArrayExpression.every(v).in(Expression.property("items"))
            .satisfies(ArrayExpression.variable("v.price").lessThan(Expression.int(10)))
        #expect(every.sqlExpression == .quantified(.every, variable: "v", in: Self.prop("items"),
                                                   satisfies: .binary(.less, Self.prop("v", "price"), .literal(.int(10)))))

        let anyAndEvery = ArrayExpression.anyAndEvery(v).in(Expression.property("items")).satisfies(v.isValued())
        #expect(anyAndEvery.sqlExpression == .quantified(.anyAndEvery, variable: "v", in: Self.prop("items"),
                                                         satisfies: .check(Self.prop("v"), .valued, negated: false)))
    }

    @Test func selectResults() {
        #expect(SelectResult.all().item == SelectItem(.all(source: nil)))
        #expect(SelectResult.all().from("airline").item == SelectItem(.all(source: "airline")))
        #expect(SelectResult.expression(Expression.all()).item == SelectItem(.all(source: nil)))
        #expect(SelectResult.property("geo.alt").item == SelectItem(.expression(Self.prop("geo", "alt"))))
        #expect(SelectResult.expression(Meta.id).as("metaId").item
                == SelectItem(.expression(.meta(source: nil, field: .id)), alias: "metaId"))
        #expect(SelectResult.expression(Function.count(Expression.all())).as("mycount").item
                == SelectItem(.expression(.function("COUNT", [.star], distinct: false)), alias: "mycount"))
        #expect(SelectResult.property("name").as("n").item == SelectItem(.expression(Self.prop("name")), alias: "n"))
    }

    @Test func orderings() {
        #expect(Ordering.property("title").item == OrderItem(Self.prop("title"), descending: false))
        #expect(Ordering.property("title").ascending().item == OrderItem(Self.prop("title"), descending: false))
        #expect(Ordering.expression(Meta.sequence).descending().item
                == OrderItem(.meta(source: nil, field: .sequence), descending: true))
    }

    @Test func dates() {
        #expect(Expression.date(Date(timeIntervalSince1970: 0)).sqlExpression
                == .literal(.string("1970-01-01T00:00:00.000Z")))
        #expect(Expression.date(Date(timeIntervalSince1970: 951_782_400.25)).sqlExpression
                == .literal(.string("2000-02-29T00:00:00.250Z")))
        #expect(Expression.date(Date(timeIntervalSince1970: -1.5)).sqlExpression
                == .literal(.string("1969-12-31T23:59:58.500Z")))
    }

    @Test func valueIndexItems() {
        #expect(ValueIndexItem.property("geo.alt").expression == Self.prop("geo", "alt"))
        #expect(ValueIndexItem.expression(Function.lower(Expression.property("name"))).expression
                == .function("LOWER", [Self.prop("name")], distinct: false))
    }
}
