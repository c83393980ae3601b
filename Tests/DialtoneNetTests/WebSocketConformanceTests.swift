import DialtoneNet
import DialtoneTestSupport
import Foundation
import Testing

/// RFC 6455 rules the Autobahn cases check (scripts/autobahn.py runs them all), pinned here with
/// exact bytes over a raw socket: most are lws's own checks, enabled or relied on by DialtoneNet,
/// and a regression in either would otherwise only show in the conformance run.
@Suite(.serialized) struct WebSocketConformanceTests {
  private static let text: UInt8 = 0x1
  private static let continuation: UInt8 = 0x0
  private static let close: UInt8 = 0x8
  private static let ping: UInt8 = 0x9
  private static let pong: UInt8 = 0xa

  /// Sends `frames` in one write after the handshake; what the server answers (up to its close,
  /// `expecting` frames, or a quiet second).
  private func exchange(_ frames: [[UInt8]], expecting: Int = 16) async throws -> [RawWebSocket.Frame] {
    let server = try startServer(EchoHandler())
    let port = server.port
    let reply = try await blockingIO {
      let socket = try RawWebSocket.handshake(port: port)
      defer { socket.close() }
      socket.write(frames.flatMap { $0 })
      return socket.readFrames(seconds: 1, limit: expecting)
    }
    await server.stop()
    return reply
  }

  private func frame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0) -> [UInt8] {
    RawWebSocket.frame(opcode: opcode, payload: payload, fin: fin, rsv: rsv)
  }

  /// The reply is exactly one close frame with `code`: nothing of the bad message was delivered.
  private func expectClosed(
    _ reply: [RawWebSocket.Frame], with code: UInt16, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    #expect(reply.map(\.opcode) == [Self.close], "got \(reply)", sourceLocation: sourceLocation)
    #expect(reply.first?.closeCode == code, sourceLocation: sourceLocation)
  }

  // MARK: - UTF-8 (RFC 6455 §8.1): 1007

  @Test func aTextMessageThatIsNotUTF8IsClosedWith1007() async throws {
    // A UTF-16 surrogate encoded as UTF-8 (ED A0 80): not valid UTF-8.
    expectClosed(try await exchange([frame(Self.text, Array("κόσμε".utf8) + [0xed, 0xa0, 0x80])]), with: 1007)
  }

  @Test func aTextMessageCutMidCharacterIsClosedWith1007() async throws {
    expectClosed(try await exchange([frame(Self.text, Array("Hello-".utf8) + [0xce])]), with: 1007)
  }

  /// Checked as the fragments arrive: the bad second fragment fails the connection although the
  /// message never completes.
  @Test func anInvalidFragmentFailsTheMessageBeforeItEnds() async throws {
    let reply = try await exchange([
      frame(Self.text, Array("valid".utf8), fin: false), frame(Self.continuation, [0xf8, 0x88, 0x80], fin: false),
    ])
    expectClosed(reply, with: 1007)
  }

  /// A character split across fragments is valid: only the reassembled message counts.
  @Test func aCharacterSplitAcrossFragmentsIsEchoed() async throws {
    let bytes = Array("µ@ßö".utf8)
    let reply = try await exchange(
      [frame(Self.text, Array(bytes.prefix(1)), fin: false), frame(Self.continuation, Array(bytes.dropFirst()))],
      expecting: 1)
    #expect(reply == [RawWebSocket.Frame(opcode: Self.text, payload: bytes)])
  }

  /// lws checks the reason before it reports the close to us and then drops the connection
  /// without a close frame of its own: RFC 6455 §7.1.7 allows that (it SHOULD send one), and
  /// Autobahn 7.5.1 accepts it. What matters: the connection ends and nothing is echoed.
  @Test func aCloseReasonThatIsNotUTF8FailsTheConnection() async throws {
    let reply = try await exchange([frame(Self.close, RawWebSocket.closePayload(1000, [0xce, 0xba, 0xff]))])
    #expect(reply.allSatisfy { $0.opcode == Self.close && $0.closeCode != 1000 }, "got \(reply)")
  }

  // MARK: - Close codes (RFC 6455 §7.4): invalid ones get 1002, valid ones are echoed

  @Test(arguments: [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999] as [UInt16])
  func anInvalidCloseCodeIsAnsweredWith1002(code: UInt16) async throws {
    expectClosed(try await exchange([frame(Self.close, RawWebSocket.closePayload(code))]), with: 1002)
  }

  @Test(arguments: [1000, 1001, 1003, 1007, 1011, 3000, 3999, 4000, 4999] as [UInt16])
  func aValidCloseCodeIsEchoed(code: UInt16) async throws {
    expectClosed(try await exchange([frame(Self.close, RawWebSocket.closePayload(code))]), with: code)
  }

  // MARK: - Framing (RFC 6455 §5.2, §5.4, §5.5): 1002

  @Test func reservedBitsAreAProtocolError() async throws {
    expectClosed(try await exchange([frame(Self.text, Array("rsv".utf8), rsv: 0x40)]), with: 1002)
  }

  @Test(arguments: [0x3, 0x7, 0xb, 0xf] as [UInt8])
  func aReservedOpcodeIsAProtocolError(opcode: UInt8) async throws {
    expectClosed(try await exchange([frame(opcode, [])]), with: 1002)
  }

  @Test func aFragmentedPingIsAProtocolError() async throws {
    expectClosed(try await exchange([frame(Self.ping, Array("frag".utf8), fin: false)]), with: 1002)
  }

  @Test func aContinuationWithoutAMessageIsAProtocolError() async throws {
    expectClosed(try await exchange([frame(Self.continuation, Array("orphan".utf8))]), with: 1002)
  }

  @Test func aNewMessageInsideAFragmentedOneIsAProtocolError() async throws {
    let reply = try await exchange([
      frame(Self.text, Array("first".utf8), fin: false), frame(Self.text, Array("second".utf8)),
    ])
    expectClosed(reply, with: 1002)
  }

  // MARK: - Masking (RFC 6455 §5.1): 1002

  /// A client frame without a mask fails the connection with 1002; the message is not delivered
  /// (libwebsockets 4.1 accepted it).
  @Test func anUnmaskedFrameIsAProtocolError() async throws {
    let unmasked: [UInt8] = [0x81, 0x05] + Array("hello".utf8)
    expectClosed(try await exchange([unmasked]), with: 1002)
  }

  /// The same after a valid message: that one is echoed, the unmasked one is not.
  @Test func anUnmaskedFrameAfterAValidOneFailsTheConnection() async throws {
    let reply = try await exchange([frame(Self.text, Array("valid".utf8)), [0x81, 0x02] + Array("no".utf8)])
    #expect(reply.map(\.opcode) == [Self.text, Self.close], "got \(reply)")
    #expect(reply.last?.closeCode == 1002)
  }

  /// Ten pings in one burst get ten pongs, each with its ping's payload (Autobahn 2.10).
  @Test func everyPingOfABurstIsAnswered() async throws {
    let pings = (0..<10).map { frame(Self.ping, Array("ping \($0)".utf8)) }
    let reply = try await exchange(pings, expecting: 10)
    #expect(reply == (0..<10).map { RawWebSocket.Frame(opcode: Self.pong, payload: Array("ping \($0)".utf8)) })
  }

  /// A ping before a message in the same read is answered before that message's echo.
  @Test func aPingBeforeAMessageIsAnsweredFirst() async throws {
    let reply = try await exchange(
      [frame(Self.ping, Array("p".utf8)), frame(Self.text, Array("m".utf8))], expecting: 2)
    #expect(
      reply == [
        RawWebSocket.Frame(opcode: Self.pong, payload: Array("p".utf8)),
        RawWebSocket.Frame(opcode: Self.text, payload: Array("m".utf8)),
      ])
  }

  // MARK: - Ordering

  /// The close is the peer's last frame (RFC 6455 §5.5.1): a message after it is not delivered,
  /// and nothing but the answering close goes back (Autobahn 7.1.4).
  @Test func aMessageAfterTheCloseFrameIsIgnored() async throws {
    let reply = try await exchange([
      frame(Self.close, RawWebSocket.closePayload(1000)), frame(Self.text, Array("Hello World!".utf8)),
    ])
    expectClosed(reply, with: 1000)
  }

  /// A ping inside a fragmented message is answered before the echo of that message: lws owes
  /// the pong from the same read, and a reply sent while a message is delivered waits for it
  /// (Autobahn 5.6).
  @Test func aPingInsideAFragmentedMessageIsAnsweredFirst() async throws {
    let reply = try await exchange(
      [
        frame(Self.text, Array("fragment1".utf8), fin: false), frame(Self.ping, Array("ping payload".utf8)),
        frame(Self.continuation, Array("fragment2".utf8)),
      ], expecting: 2)
    #expect(
      reply == [
        RawWebSocket.Frame(opcode: Self.pong, payload: Array("ping payload".utf8)),
        RawWebSocket.Frame(opcode: Self.text, payload: Array("fragment1fragment2".utf8)),
      ])
  }
}
