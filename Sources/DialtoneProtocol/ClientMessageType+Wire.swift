// memcmp, from the platform's C library (this file needs nothing else of Foundation).
#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A client message's type read from its wire name's bytes, and its place among the types.
///
/// The server reads a type on every frame it receives. `init?(rawValue:)` of a `String`-backed
/// enum with this many cases goes through the standard library's string-switch cache, which
/// hashes the name each time (measured: ~1.1 `String` hashes per relayed message), and counting
/// frames in a table keyed by the enum hashed the name again. Here the name's length picks the
/// few types it can be, whose names are then compared byte for byte; `ordinal` keys tables by
/// an integer.
extension ClientMessageType {
  /// The type whose wire name (`rawValue`) is exactly `bytes` (UTF-8): case and length must
  /// match, so a prefix, a longer name or another case's spelling is no type (nil).
  public init?(wireName bytes: UnsafeBufferPointer<UInt8>) {
    guard let type = Self.named(bytes) else { return nil }
    self = type
  }

  /// The candidates by length, the relay's frequent ones first in each. Every name is checked
  /// whole (`isNamed`), so a wrong candidate here could only miss a type, never invent one
  /// (`ClientMessageTypeWireTests` reads every type's name back).
  private static func named(_ bytes: UnsafeBufferPointer<UInt8>) -> Self? {
    func match(_ type: Self) -> Self? { type.isNamed(bytes) ? type : nil }
    switch bytes.count {
    case 3: return match(.ack)
    case 4: return match(.ping) ?? match(.busy) ?? match(.hold)
    case 5: return match(.hello) ?? match(.offer)
    case 6: return match(.answer) ?? match(.invite) ?? match(.accept) ?? match(.cancel) ?? match(.hangup)
    case 7: return match(.ringing) ?? match(.decline) ?? match(.quality)
    case 8: return match(.getCall)
    case 9: return match(.candidate) ?? match(.groupEnd) ?? match(.roomJoin) ?? match(.getGroup)
    case 10: return match(.groupJoin)
    case 11: return match(.mediaState) ?? match(.groupLeave) ?? match(.groupOffer)
    case 12: return match(.groupCreate) ?? match(.groupInvite) ?? match(.groupRemove) ?? match(.groupAnswer)
    case 13: return match(.groupRinging) ?? match(.groupDecline) ?? match(.groupRestart)
    case 15: return match(.groupCandidate)
    case 17: return match(.endOfCandidates)
    case 19: return match(.iceRestartRequest)
    case 23: return match(.groupEndOfCandidates)
    default: return nil
    }
  }

  /// Whether `bytes` are this type's name. The names are literals (immortal or small strings):
  /// reading their UTF-8 allocates nothing. One `memcmp`: with `elementsEqual`'s generic walk
  /// this took 384 instructions a frame, now 124 (the eighteenth look in docs/benchmarks.md).
  private func isNamed(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    var name = rawValue
    return name.withUTF8 { own in
      guard own.count == bytes.count else { return false }
      guard let ownStart = own.baseAddress, let start = bytes.baseAddress else { return own.isEmpty }
      return memcmp(ownStart, start, own.count) == 0
    }
  }

  /// The type's position in `allCases` (declaration order), `0..<caseCount`: an index for
  /// tables kept per type, found without hashing the name.
  public var ordinal: Int {
    switch self {
    case .hello: 0
    case .ack: 1
    case .ping: 2
    case .invite: 3
    case .ringing: 4
    case .accept: 5
    case .decline: 6
    case .busy: 7
    case .cancel: 8
    case .hangup: 9
    case .offer: 10
    case .answer: 11
    case .candidate: 12
    case .endOfCandidates: 13
    case .iceRestartRequest: 14
    case .getCall: 15
    case .mediaState: 16
    case .hold: 17
    case .quality: 18
    case .groupCreate: 19
    case .groupRinging: 20
    case .groupDecline: 21
    case .groupJoin: 22
    case .groupLeave: 23
    case .groupEnd: 24
    case .groupInvite: 25
    case .groupRemove: 26
    case .roomJoin: 27
    case .groupOffer: 28
    case .groupAnswer: 29
    case .groupCandidate: 30
    case .groupEndOfCandidates: 31
    case .groupRestart: 32
    case .getGroup: 33
    }
  }

  /// How many types there are (`ordinal`'s bound). Read when a table is made, not per message:
  /// `allCases` builds its array each time.
  public static var caseCount: Int { allCases.count }
}
