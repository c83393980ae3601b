import DialtoneClient
import DialtoneClientLinux
import DialtoneNet
import DialtoneProtocol
import DialtoneServer
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

private let secret = "call-client-test-secret-0123456789"

/// A transport whose sockets can be cut and kept from reconnecting (a device in a tunnel).
private final class GatedTransport: SignalingTransport, Sendable {
  private let inner: LWSSignalingTransport
  private struct Gate: Sendable {
    var offline = false
    var sockets: [any SignalingSocket] = []
  }
  private let gate = Locked(Gate())

  init(inner: LWSSignalingTransport) { self.inner = inner }

  func open(url: String, bearerToken: String?) -> any SignalingSocket {
    gate.withLock { gate in
      if gate.offline { return DeadSocket() }
      let socket = inner.open(url: url, bearerToken: bearerToken)
      gate.sockets.append(socket)
      return socket
    }
  }

  func goOffline() {
    let open = gate.withLock { gate in
      gate.offline = true
      defer { gate.sockets.removeAll() }
      return gate.sockets
    }
    for socket in open { socket.close(code: CloseCode.goingAway.rawValue) }
  }

  func goOnline() { gate.withLock { $0.offline = false } }
}

/// A CallClient's events in order.
private struct ClientEvents: Sendable {
  private let log: EventLog<CallClient.Event>

  init(_ client: CallClient) { log = EventLog(client.events) }

  var incoming: [CallEngine] {
    log.compactMap {
      if case .incoming(let e) = $0 { return e }
      return nil
    }
  }
  var glares: [(CallID, CallID)] {
    log.compactMap {
      if case .glare(let r, let s) = $0 { return (r, s) }
      return nil
    }
  }
  var connections: Int {
    log.count {
      if case .connected = $0 { return true }
      return false
    }
  }
}

/// CallClient against the real server over loopback, with scripted peer connections.
@Suite(.serialized) struct CallClientTests {
  typealias Rig = LoopbackServer

  private struct Device {
    let client: CallClient
    let events: ClientEvents
    let factory: EngineFakePeerConnectionFactory
    let transport: GatedTransport
  }

  /// Today's flow: these tests follow the invite's connections (pre-connect's legs race them;
  /// PreconnectFlowTests and CallEnginePreconnectTests cover 9b).
  private static let todaysFlow: CallClient.Configuration = {
    var configuration = CallClient.Configuration()
    configuration.policy.preconnect = false
    return configuration
  }()

  private func device(
    _ rig: Rig, _ user: String, _ deviceId: String = "phone",
    configuration: CallClient.Configuration = todaysFlow, closeGate: TestGate? = nil
  ) async -> Device {
    let transport = GatedTransport(inner: LWSSignalingTransport(client: rig.network))
    var signalingConfiguration = SignalingClient.Configuration(url: rig.webSocketURL)
    signalingConfiguration.backoff = [.milliseconds(50)]
    let signaling = SignalingClient(configuration: signalingConfiguration, transport: transport) {
      try rig.token(user, device: deviceId)
    }
    let factory = EngineFakePeerConnectionFactory(log: EngineLog(), closeGate: closeGate)
    let client = CallClient(
      signaling: signaling, iceServers: IceServerCache(defaults: []), factory: factory,
      configuration: configuration)
    return Device(client: client, events: ClientEvents(client), factory: factory, transport: transport)
  }

  private func online(_ devices: Device...) async throws {
    for d in devices {
      await d.client.start()
      try #require(await eventually { d.events.connections >= 1 })
    }
  }

  @Test func aDialRingsEveryDeviceAndTheAnswerConnectsBothEngines() async throws {
    let rig = try await Rig(secret: secret)
    let alice = await device(rig, "alice")
    let bobPhone = await device(rig, "bob", "phone")
    let bobLaptop = await device(rig, "bob", "laptop")
    try await online(alice, bobPhone, bobLaptop)

    let call = await alice.client.dial("bob")
    try #require(await eventually { bobPhone.events.incoming.count == 1 && bobLaptop.events.incoming.count == 1 })
    #expect(await eventually { await call.state == .ringing })
    let ringing = try #require(bobPhone.events.incoming.first)
    #expect(ringing.callId == call.callId)
    #expect(await ringing.state == .incoming)

    await bobPhone.client.answer(call.callId)
    #expect(await eventually { await call.state == .connecting })
    // The laptop stops ringing: answered elsewhere.
    let laptopEngine = try #require(bobLaptop.events.incoming.first)
    #expect(await eventually { await laptopEngine.state == .ended(.remote(.answeredElsewhere)) })
    #expect(await bobLaptop.client.engine(for: call.callId) == nil)

    // Trickle both ways through the server.
    let alicePC = try #require(alice.factory.connections.first)
    let bobPC = try #require(bobPhone.factory.connections.first)
    alicePC.emitCandidate(IceCandidate(candidate: "candidate:1 1 udp 1 127.0.0.1 5000 typ host"))
    bobPC.emitCandidate(IceCandidate(candidate: "candidate:2 1 udp 1 127.0.0.1 6000 typ host"))
    #expect(await eventually { bobPC.calls.contains("addCandidate(candidate:1 1 udp 1 127.0.0.1 5000 typ host)") })
    #expect(await eventually { alicePC.calls.contains("addCandidate(candidate:2 1 udp 1 127.0.0.1 6000 typ host)") })
    #expect(alicePC.calls.contains("setRemote(answer:answer-pc1)"))

    // Hang-up ends both sides.
    await bobPhone.client.end(call.callId)
    #expect(await eventually { await call.state == .ended(.remote(.hangup)) })
    #expect(await alice.client.activeCalls().isEmpty)

    for d in [alice, bobPhone, bobLaptop] { await d.client.stop() }
    await rig.stop()
  }

  /// A softphone quits right after its call ends elsewhere: `stop()` must wait for the ended
  /// call's connection to close, or its TURN allocation outlives the process.
  @Test func stopWaitsForACallThatEndedElsewhereToCloseItsConnection() async throws {
    let rig = try await Rig(secret: secret)
    let alice = await device(rig, "alice")
    let gate = TestGate()
    let bobPhone = await device(rig, "bob", "phone", configuration: .init(), closeGate: gate)
    let bobLaptop = await device(rig, "bob", "laptop")
    try await online(alice, bobPhone, bobLaptop)

    let call = await alice.client.dial("bob")
    try #require(await eventually { bobPhone.events.incoming.count == 1 && bobLaptop.events.incoming.count == 1 })
    let phoneCall = try #require(bobPhone.events.incoming.first)
    await bobLaptop.client.answer(call.callId)
    #expect(await eventually { await phoneCall.state == .ended(.remote(.answeredElsewhere)) })
    // Held by the gate: the main connection, or a pre-connect leg (9b) closing first.
    #expect(await eventually { bobPhone.factory.connections.contains { $0.calls.contains("close") } })

    let stopped = Locked(false)
    let stopping = Task {
      await bobPhone.client.stop()
      stopped.withLock { $0 = true }
    }
    for _ in 0..<200 { await Task.yield() }
    #expect(!stopped.current, "stop() returned while the ended call's connection was still closing")
    gate.open()
    await stopping.value
    let phone = bobPhone.factory.connections
    #expect(!phone.isEmpty && phone.allSatisfy { $0.calls.last == "closed" }, "\(phone.map(\.calls))")

    for d in [alice, bobLaptop] { await d.client.stop() }
    await rig.stop()
  }

  @Test func glareEndsOneCallAndTheLoserAnswersTheSurvivor() async throws {
    let rig = try await Rig(secret: secret)
    let alice = await device(rig, "alice")
    let bob = await device(rig, "bob")
    try await online(alice, bob)

    // Both dial at once; the lower call id survives (protocol.md section 9).
    async let a = alice.client.dial("bob", callId: "glare-a")
    async let b = bob.client.dial("alice", callId: "glare-b")
    let (aliceCall, bobCall) = await (a, b)

    #expect(await eventually { await bobCall.state == .ended(.glare(replacedBy: "glare-a")) })
    #expect(await eventually { bob.events.glares.contains { $0 == ("glare-b", "glare-a") } })
    // Bob answered Alice's call automatically; Alice's call connects.
    #expect(await eventually { await aliceCall.state == .connecting })
    let survivor = try #require(bob.events.incoming.first { $0.callId == "glare-a" })
    #expect(await survivor.state == .connecting)
    #expect(await aliceCall.state != .ended(.glare(replacedBy: "glare-a")))

    for d in [alice, bob] { await d.client.stop() }
    await rig.stop()
  }

  /// Both with pre-connect: an answer given before the invite arrived asks for no leg (the
  /// accept follows at once), so Alice makes only the invite's connection.
  @Test func aCallAnsweredBeforeItsInviteArrivesIsAcceptedOnArrival() async throws {
    let rig = try await Rig(secret: secret)
    let alice = await device(rig, "alice", configuration: .init())
    let bob = await device(rig, "bob", configuration: .init())
    try await online(alice)

    let call = await alice.client.dial("bob")
    // A VoIP push woke Bob's app and he tapped answer before signaling connected.
    await bob.client.answer(call.callId)
    try await online(bob)
    #expect(await eventually { await call.state == .connecting })
    let engine = try #require(bob.events.incoming.first)
    #expect(await engine.state == .connecting)
    #expect(alice.factory.connections.count == 1 && bob.factory.connections.count == 1)

    for d in [alice, bob] { await d.client.stop() }
    await rig.stop()
  }

  @Test func afterAResyncACallThatEndedMeanwhileEndsHere() async throws {
    let rig = try await Rig(secret: secret, resumeWindow: 0.2)
    let alice = await device(rig, "alice")
    let bob = await device(rig, "bob")
    try await online(alice, bob)

    let call = await alice.client.dial("bob")
    try #require(await eventually { bob.events.incoming.count == 1 })
    let ringing = try #require(bob.events.incoming.first)

    // Bob's device drops off long enough for his session to expire; Alice gives up meanwhile.
    bob.transport.goOffline()
    try await Task.sleep(for: .milliseconds(100))
    await call.hangup()
    try await Task.sleep(for: .milliseconds(600))
    bob.transport.goOnline()

    // The new session replays nothing; get-call says the call was cancelled.
    #expect(await eventually { await ringing.state == .ended(.remote(.cancelled)) })
    #expect(bob.events.connections >= 2)

    for d in [alice, bob] { await d.client.stop() }
    await rig.stop()
  }
}
