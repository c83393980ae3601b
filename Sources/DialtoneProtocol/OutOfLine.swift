/// A value kept on the heap, behind one reference, with value semantics.
///
/// A Swift enum or struct is as large as its largest payload, and a message is copied whole each
/// time it moves (into the envelope, the hub's outputs, a session's delivery): a rare, large
/// payload — a quality report, a group invite, the call state in a `get-call` ack — made every
/// message, candidates included, two to three times the size they need (ClientMessage 233 bytes,
/// ServerMessage 265), and each copy a `memcpy` of that size. Such payloads stay out of line,
/// either as `indirect` enum cases or, for an optional field of a hot type, in this box (public
/// for the server's own hot types; nothing in the protocol's API takes or returns one).
public indirect enum OutOfLine<Value: Sendable>: Sendable {
  case boxed(Value)

  public init(_ value: Value) { self = .boxed(value) }

  public var value: Value {
    switch self {
    case .boxed(let value): value
    }
  }
}

extension OutOfLine: Equatable where Value: Equatable {}
extension OutOfLine: Hashable where Value: Hashable {}
