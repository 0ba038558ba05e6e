/// A JSON value with its type known at compile time: what the API's answers and progress events
/// are built from. Writing one costs no dynamic casts (`JSON.bytes` on a `[String: Any]` spent a
/// third of a `GET /downloads/{id}` in `swift_dynamicCast` and key sorting, `scripts/bench` section 4).
/// The output is the same as `JSON.bytes` for the equivalent dictionary: members in byte order of
/// their keys, integral doubles as integers, non-finite doubles as `null`.
enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case object(JSONObject)
    case array([JSONValue])

    /// `value` as a string, or `null`.
    static func string(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
    /// `value` as an integer, or `null`.
    static func int(_ value: Int64?) -> JSONValue { value.map(JSONValue.int) ?? .null }
    /// `value` as a number, or `null`.
    static func double(_ value: Double?) -> JSONValue { value.map(JSONValue.double) ?? .null }

    func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: b ? "true".utf8 : "false".utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d): JSON.writeDouble(d, into: &out)
        case .string(let s): JSON.writeString(s, into: &out)
        case .object(let o): o.write(into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                element.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    }

    var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        write(into: &out)
        return out
    }

    var string: String { String(decoding: bytes, as: UTF8.self) }
}

/// A JSON object: members in the order they were set, written in key order.
/// Setting a key again replaces its value.
struct JSONObject: Sendable, Equatable {
    private(set) var members: [(key: String, value: JSONValue)] = []
    /// Whether `members` are in key order as they stand (checked as each is added, so writing needs
    /// no pass over them).
    private var ordered = true

    init() {}

    init(_ members: KeyValuePairs<String, JSONValue>) {
        self.members.reserveCapacity(members.count)
        for (key, value) in members { self[key] = value }
    }

    subscript(key: String) -> JSONValue? {
        get { members.first { $0.key == key }?.value }
        set {
            let index = members.firstIndex { $0.key == key }
            switch (index, newValue) {
            case (let i?, let v?): members[i].value = v
            case (let i?, nil): members.remove(at: i)
            case (nil, let v?): append(key, v)
            case (nil, nil): break
            }
        }
    }

    /// Adds a member without looking for an earlier one with the same key: for building an
    /// object whose keys are known to differ (the API's answers), where `subscript` would search.
    mutating func append(_ key: String, _ value: JSONValue?) {
        guard let value else { return }
        if ordered, let last = members.last?.key, !(last < key) { ordered = false }
        members.append((key, value))
    }

    func write(into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        var first = true
        for member in inKeyOrder {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            JSON.writeString(member.key, into: &out)
            out.append(UInt8(ascii: ":"))
            member.value.write(into: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// The members sorted by key (no sort when they were added in that order). Keys compare as
    /// Swift strings, which for the API's ASCII keys is byte order, as `JSON.bytes` sorts.
    private var inKeyOrder: [(key: String, value: JSONValue)] {
        ordered ? members : members.sorted { $0.key < $1.key }
    }

    var bytes: [UInt8] { JSONValue.object(self).bytes }

    static func == (a: JSONObject, b: JSONObject) -> Bool {
        a.members.count == b.members.count && zip(a.inKeyOrder, b.inKeyOrder).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
}
