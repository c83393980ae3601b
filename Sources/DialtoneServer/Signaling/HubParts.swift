import DialtoneCalls
import DialtoneMetrics
import DialtoneNet
import DialtoneProtocol
import DialtoneSFU
import DialtoneSessions
import DialtoneStorage
import DialtoneSupport
import Foundation

/// The parts of the hub, wired to each other once (the composition root makes them and hands
/// them to `SignalingHub`, which only routes events among them). They share the hub's thread:
/// none is used anywhere else.
struct HubParts {
  struct Settings: Sendable {
    var helloTimeout: Duration
    var resumeWindow: Duration
    var heartbeatSeconds: Int
    var maxMessageBytes: Int
    var limits = ServerLimits()
    /// Plain relayed candidates skip the general outcome (`RequestPipeline`'s fast lane); off
    /// only to compare the two paths' output in tests.
    var relayFastLane = true
  }

  let settings: Settings
  let clock: any DialtoneClock
  let log: Log
  let desk: CallDesk
  let gate: SocketGate
  let registry = SessionRegistry()
  let sessions: SessionHost
  let requests: RequestPipeline
  let outcomes: OutcomeGate
  let effects: EffectApplier
  let placement: any CallPlacement
  let store: (any SessionStore)?
  let observations: Observations
  let mailbox = HubMailbox()

  init(
    settings: Settings, clock: any DialtoneClock, authenticator: TokenAuthenticator, iceServers: IceServerIssuer,
    desk: CallDesk, sfu: (any SFUBackend)? = nil, effectSink: any CallEffectSink, journal: CallJournal,
    liveCalls: any LiveCallStore, observations: Observations, quality: any QualityStore,
    remote: any RemoteDevices = NoRemoteDevices(), placement: any CallPlacement = LocalCalls(),
    store: (any SessionStore)? = nil, log: Log
  ) {
    self.settings = settings
    self.clock = clock
    self.log = log
    self.desk = desk
    self.placement = placement
    self.store = store
    self.observations = observations
    gate = SocketGate(limits: settings.limits, helloTimeout: settings.helloTimeout)
    let handshake = Handshake(
      authenticator: authenticator, iceServers: iceServers, observations: observations,
      heartbeatSeconds: settings.heartbeatSeconds, maxMessageBytes: settings.maxMessageBytes)
    sessions = SessionHost(
      gate: gate, registry: registry, store: store, remote: remote, handshake: handshake, clock: clock,
      mailbox: mailbox, resumeWindow: settings.resumeWindow, limits: settings.limits,
      sent: observations.metrics.messagesSent, log: log)
    effects = EffectApplier(
      registry: registry, store: store, sfu: sfu, remote: remote, sink: effectSink, clock: clock, mailbox: mailbox)
    outcomes = OutcomeGate(
      journal: journal, effects: effects, placement: placement, registry: registry, metrics: observations.metrics)
    let quality = QualityIntake(
      quality: quality, outcomes: outcomes, observations: observations, clock: clock, mailbox: mailbox, log: log)
    requests = RequestPipeline(
      desk: desk, outcomes: outcomes, quality: quality, placement: placement, liveCalls: liveCalls,
      observations: observations, clock: clock, mailbox: mailbox, limits: settings.limits, log: log, store: store,
      fastLane: settings.relayFastLane)
  }
}
