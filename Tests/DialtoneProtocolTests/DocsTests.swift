import DialtoneJSON
import DialtoneProtocol
import Foundation
import Testing

/// Keeps docs/protocol.md and the code in step: every `→ {...}` line of the document must
/// decode (strictly) as a ClientMessage, every `← {...}` line as a server message, and each
/// must re-encode to the same JSON (so the examples contain no field the code drops).
/// Every ```json block must be a body or type the code knows, shape for shape.
@Suite("docs/protocol.md examples")
struct DocsTests {
  static func document() throws -> String {
    let here = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
    let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let url = root.appendingPathComponent("docs").appendingPathComponent("protocol.md")
    return try String(contentsOf: url, encoding: .utf8)
  }

  struct Example: CustomStringConvertible {
    var line: Int
    var clientToServer: Bool
    var json: String
    var description: String { "protocol.md:\(line)" }
  }

  static func examples(in text: String) -> [Example] {
    var result: [Example] = []
    for (offset, raw) in text.components(separatedBy: "\n").enumerated() {
      let line = raw.trimmingCharacters(in: .whitespaces)
      for (arrow, clientToServer) in [("→ ", true), ("← ", false)] where line.hasPrefix(arrow + "{") {
        result.append(Example(line: offset + 1, clientToServer: clientToServer, json: String(line.dropFirst(2))))
      }
    }
    return result
  }

  static func jsonBlocks(in text: String) -> [(line: Int, json: String)] {
    var blocks: [(Int, String)] = []
    var current: [String]?
    var start = 0
    for (offset, line) in text.components(separatedBy: "\n").enumerated() {
      if current == nil, line.trimmingCharacters(in: .whitespaces) == "```json" {
        current = []
        start = offset + 2
      } else if current != nil, line.trimmingCharacters(in: .whitespaces) == "```" {
        blocks.append((start, current?.joined(separator: "\n") ?? ""))
        current = nil
      } else if current != nil {
        current?.append(line)
      }
    }
    return blocks
  }

  @Test func messageExamplesMatchTheCode() throws {
    let examples = Self.examples(in: try Self.document())
    #expect(examples.count >= 40)
    var clientTypes = Set<String>()
    var serverTypes = Set<String>()
    for example in examples {
      let literal = try JSONValue.parse(Array(example.json.utf8))
      do {
        if example.clientToServer {
          let message = try MessageCodec.decodeClientMessage(example.json)
          clientTypes.insert(message.message.type.rawValue)
          #expect(message.json == literal, "\(example) re-encodes differently: \(message.jsonString)")
        } else {
          let envelope = try MessageCodec.decodeServerMessage(example.json, options: .strict)
          serverTypes.insert(envelope.message.typeName)
          #expect(envelope.json == literal, "\(example) re-encodes differently: \(envelope.jsonString)")
          let hasSeq = envelope.seq != nil
          // A candidate's `ack` has no seq on one server and in write-behind (protocol.md 4.2).
          let mayLackSeq = [.welcome, .error, .ack].contains(envelope.message.knownType)
          #expect(hasSeq || mayLackSeq, "\(example) lacks seq")
          #expect(!(envelope.message.knownType == .welcome && hasSeq), "\(example): welcome has no seq")
        }
      } catch {
        Issue.record("\(example): \(error)")
      }
    }
    #expect(clientTypes == Set(ClientMessageType.allCases.map(\.rawValue)), "client types without an example")
    #expect(serverTypes == Set(ServerMessageType.allCases.map(\.rawValue)), "server types without an example")
  }

  /// Section 17 states the push delivery parameters and shows every payload key.
  @Test func pushSectionStatesDelivery() throws {
    let text = try Self.document()
    guard let start = text.range(of: "## 17. Push payloads"), let end = text.range(of: "## 18.") else {
      Issue.record("section 17 not found")
      return
    }
    let section = String(text[start.upperBound..<end.lowerBound])
    for phrase in [
      "`apns-push-type: voip`", "`apns-topic: <bundleId>.voip`", "`apns-priority: 10`", "`apns-expiration: 0`",
      "`android.priority: \"high\"`", "`android.ttl: \"0s\"`", "`apns-push-type: alert`", "\"type\":\"missed-call\"",
    ] {
      #expect(section.contains(phrase), "section 17 does not mention \(phrase)")
    }
    let incoming = IncomingCallPush(
      callId: "c", callerId: "a", callerDeviceId: "d", callerName: "A", hasVideo: false, createdAt: 1)
    for key in (incoming.json.objectValue ?? [:]).keys {
      #expect(section.contains("\"\(key)\":"), "no example shows \(key)")
    }
    for key in ["callId", "callerId", "callerName", "callerHandle", "hasVideo", "createdAt"] {
      #expect(section.contains("| `\(key)"), "the field table lacks \(key)")
    }
  }

  /// Decodes `literal` as `T` and checks it re-encodes to the same JSON.
  private static func matches<T: WireCodable>(_ type: T.Type, _ literal: JSONValue) -> Bool {
    guard let value = try? T(json: literal, options: .strict) else { return false }
    return value.json == literal
  }

  @Test func jsonBlocksMatchTheCode() throws {
    let blocks = Self.jsonBlocks(in: try Self.document())
    #expect(blocks.count >= 15)
    for (line, json) in blocks {
      guard let literal = try? JSONValue.parse(Array(json.utf8)) else {
        Issue.record("protocol.md:\(line): invalid JSON")
        continue
      }
      let known =
        Self.matches(ErrorBody.self, literal) || Self.matches(HealthResponse.self, literal)
        || Self.matches(MeResponse.self, literal) || Self.matches(IceServersResponse.self, literal)
        || Self.matches(CallHistoryResponse.self, literal) || Self.matches(DeviceInfo.self, literal)
        || (Self.matches(DeviceRegistration.self, literal)
          && (try? DeviceRegistration(json: literal).validate()) != nil)
        || Self.matches(Peer.self, literal) || Self.matches(IceCandidate.self, literal)
        || Self.matches(IceServer.self, literal) || Self.matches(CallState.self, literal)
        || Self.matches(IncomingCallPush.self, literal) || Self.matches(MissedCallPush.self, literal)
        || Self.matches(GroupCallState.self, literal) || Self.matches(GroupCallHistoryResponse.self, literal)
        || Self.matches(CallDetailResponse.self, literal) || Self.matches(DirectoryUpload.self, literal)
        || Self.matches(DirectoryResponse.self, literal)
      if known { continue }
      // The FCM form of the push payload: all strings.
      if let push = try? IncomingCallPush(json: literal, options: .strict),
        literal == .object(push.fcmData.mapValues { .string($0) })
      {
        continue
      }
      // The JWT claims example.
      if literal["sub"] != nil, literal["exp"] != nil { continue }
      Issue.record("protocol.md:\(line): JSON block matches no known type: \(json)")
    }
  }
}
