import DialtoneProtocol
import Testing

/// `ClientMessageType(wireName:)` against `init(rawValue:)`, its model, and `ordinal`'s table index.
struct ClientMessageTypeWireTests {
  private func byBytes(_ bytes: [UInt8]) -> ClientMessageType? {
    bytes.withUnsafeBufferPointer { ClientMessageType(wireName: $0) }
  }

  /// What `init(rawValue:)` says of the same bytes (all names are ASCII, so bytes that are not
  /// UTF-8 are no name either way).
  private func byModel(_ bytes: [UInt8]) -> ClientMessageType? {
    ClientMessageType(rawValue: String(decoding: bytes, as: UTF8.self))
  }

  @Test func everyTypeIsReadFromItsName() {
    for type in ClientMessageType.allCases {
      #expect(byBytes(Array(type.rawValue.utf8)) == type, "\(type.rawValue)")
    }
  }

  /// Every name's prefixes, extensions, case changes and one-byte changes at every position,
  /// and every name over every other's: the same answer as `init(rawValue:)` (nil but for the
  /// rare change that spells another type, which must then be that type).
  @Test func anyOtherBytesAreWhatRawValueSays() {
    var tried: [[UInt8]] = [[], [0], Array("type".utf8), Array("Candidate".utf8), Array("CANDIDATE".utf8)]
    let replacements = Array("aceghnoprstz-_ AZ".utf8) + [0, 0x7F, 0xC3, 0xFF]
    for type in ClientMessageType.allCases {
      let name = Array(type.rawValue.utf8)
      for length in 0..<name.count { tried.append(Array(name[..<length])) }
      for extra in [UInt8(ascii: "s"), UInt8(ascii: "-"), 0, UInt8(ascii: " ")] { tried.append(name + [extra]) }
      tried.append([UInt8(ascii: " ")] + name)
      tried.append(Array(type.rawValue.uppercased().utf8))
      tried.append(Array((type.rawValue.prefix(1).uppercased() + type.rawValue.dropFirst()).utf8))
      tried.append(Array(name.dropFirst()))
      for position in name.indices {
        for byte in replacements where byte != name[position] {
          var changed = name
          changed[position] = byte
          tried.append(changed)
        }
      }
      for other in ClientMessageType.allCases where other != type {
        tried.append(name + Array(other.rawValue.utf8))
      }
    }
    var unknown = 0
    for bytes in tried {
      #expect(byBytes(bytes) == byModel(bytes), "\(bytes)")
      if byModel(bytes) == nil { unknown += 1 }
    }
    #expect(unknown > tried.count * 9 / 10)
  }

  @Test func ordinalsAreThePositionsInAllCases() {
    #expect(ClientMessageType.caseCount == ClientMessageType.allCases.count)
    for (position, type) in ClientMessageType.allCases.enumerated() {
      #expect(type.ordinal == position, "\(type.rawValue)")
    }
  }

  /// Through the codec: an escaped name is still its type; other spellings are refused with
  /// the name as sent, and the error keeps the frame's context as before.
  @Test func framesAreDecodedByTheirTypesBytes() throws {
    let escaped = try MessageCodec.decodeClientMessage(
      #"{"type":"c\u0061ndidate","id":"m1","callId":"c1","candidate":{"candidate":"a=x"}}"#)
    #expect(escaped.message.type == .candidate && escaped.id == "m1")
    for name in ["Candidate", "candidat", "candidates", "group-end-of-candidate", "HELLO", ""] {
      do {
        _ = try MessageCodec.decodeClientMessage(#"{"type":"\#(name)","id":"m2","callId":"c2"}"#)
        Issue.record("\(name) was decoded")
      } catch {
        #expect(error.code == .unknownType)
        #expect(error.message == "unknown message type \"\(name)\"")
        #expect(error.messageType == name && error.replyTo == "m2" && error.callId == "c2")
      }
    }
    do {
      _ = try MessageCodec.decodeClientMessage(#"{"type":7,"id":"m3"}"#)
      Issue.record("a number was decoded as a type")
    } catch {
      #expect(error.code == .badRequest && error.message == "\"type\" must be a string")
      #expect(error.messageType == nil && error.replyTo == "m3")
    }
  }
}
