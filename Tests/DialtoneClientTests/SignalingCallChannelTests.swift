import DialtoneClient
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

/// A transport whose one socket records what the client sends; the test speaks for the server.
private final class ScriptedTransport: SignalingTransport, Sendable {
  let events: AsyncStream<SignalingSocketEvent>
  let serverSays: AsyncStream<SignalingSocketEvent>.Continuation
  private let sent = Locked<[String]>([])

  init() { (events, serverSays) = AsyncStream.makeStream() }

  var texts: [String] { sent.current }

  func open(url: String, bearerToken: String?) -> any SignalingSocket { Socket(transport: self) }

  private struct Socket: SignalingSocket {
    let transport: ScriptedTransport
    var events: AsyncStream<SignalingSocketEvent> { transport.events }
    func send(_ text: String) { transport.sent.withLock { $0.append(text) } }
    func close(code: Int) { transport.serverSays.finish() }
  }
}

@Suite struct SignalingCallChannelTests {
  /// A client whose session the scripted server has welcomed.
  private func welcomedClient() async -> (ScriptedTransport, SignalingClient) {
    let transport = ScriptedTransport()
    let client = SignalingClient(configuration: .init(url: "ws://test/v1/ws"), transport: transport) { "token" }
    await client.start()
    transport.serverSays.yield(.opened)
    transport.serverSays.yield(
      .text(
        #"{"type":"welcome","replyTo":"h","version":1,"sessionId":"s1","userId":"alice","deviceId":"a1","resumed":false,"resync":false,"heartbeatSeconds":25,"maxMessageBytes":65536,"iceServers":[],"iceServersTtl":3600}"#
      ))
    return (transport, client)
  }

  @Test func candidatesGoOutBackToBackWithoutWaitingForAcks() async throws {
    let (transport, client) = await welcomedClient()
    #expect(await eventually { transport.texts.count == 1 })  // the hello

    // The server never answers: with one request per round trip only the first would leave.
    let channel = SignalingCallChannel(client: client)
    for n in 0..<3 {
      try await channel.send(
        .candidate(
          .init(callId: "c1", candidate: IceCandidate(candidate: "candidate:\(n) 1 udp 1 10.0.0.1 5000 typ host"))))
    }
    #expect(await eventually { transport.texts.filter { $0.contains(#""type":"candidate""#) }.count == 3 })
    let order = transport.texts.compactMap { text in (0..<3).first { text.contains("candidate:\($0) ") } }
    #expect(order == [0, 1, 2])
    await client.stop()
  }

  @Test func aRejectedInviteIsReportedWithItsCallId() async throws {
    let (transport, client) = await welcomedClient()
    let rejections = Rejections()
    let channel = SignalingCallChannel(client: client) { await rejections.add($0) }
    try await channel.send(
      .invite(.init(callId: "c1", to: "nobody", video: false, offer: SessionDescription(sdp: "v=0\r\n"))))
    #expect(await eventually { transport.texts.contains { $0.contains(#""type":"invite""#) } })
    let invite = try #require(transport.texts.first { $0.contains(#""type":"invite""#) })
    let id = try #require(invite.firstMatch(of: /"id":"([^"]+)"/)?.1)
    transport.serverSays.yield(
      .text(#"{"type":"error","seq":1,"replyTo":"\#(id)","code":"not-found","message":"no such user"}"#))
    #expect(await eventually { await rejections.all.map(\.callId) == ["c1"] })
    #expect(await rejections.all.first?.code == .notFound)
    await client.stop()
  }
}

private actor Rejections {
  private(set) var all: [ServerMessage.ErrorMessage] = []
  func add(_ error: ServerMessage.ErrorMessage) { all.append(error) }
}
