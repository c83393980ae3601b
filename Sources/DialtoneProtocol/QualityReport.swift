/// A selected ICE candidate's type (RFC 8445 §5.1.1, plus `prflx` as `getStats` reports it).
public enum CandidateType: String, WireEnum {
  case host, srflx, prflx, relay
}

/// When the client saw each step of a call's set-up, in ms since its own start of the call
/// (dial for the caller, the invite's arrival for the callee). Absent: not seen.
public struct CallMilestones: WireCodable, Hashable {
  public static let range: ClosedRange<Int64> = 0...3_600_000

  public var accepted: Int?
  public var dtlsConnected: Int?
  public var firstAudio: Int?
  public var firstVideo: Int?
  public var iceConnected: Int?
  public var ringing: Int?

  public init(
    ringing: Int? = nil, accepted: Int? = nil, iceConnected: Int? = nil, dtlsConnected: Int? = nil,
    firstAudio: Int? = nil, firstVideo: Int? = nil
  ) {
    self.ringing = ringing
    self.accepted = accepted
    self.iceConnected = iceConnected
    self.dtlsConnected = dtlsConnected
    self.firstAudio = firstAudio
    self.firstVideo = firstVideo
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init() }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.integer("accepted", &accepted, Self.range)
    try c.integer("dtlsConnected", &dtlsConnected, Self.range)
    try c.integer("firstAudio", &firstAudio, Self.range)
    try c.integer("firstVideo", &firstVideo, Self.range)
    try c.integer("iceConnected", &iceConnected, Self.range)
    try c.integer("ringing", &ringing, Self.range)
  }

  /// The first media of either kind.
  public var firstMedia: Int? {
    switch (firstAudio, firstVideo) {
    case (let audio?, let video?): return min(audio, video)
    case (let audio?, nil): return audio
    case (nil, let video?): return video
    case (nil, nil): return nil
    }
  }

  /// Accept to first media: the set-up time a person waits through after answering.
  public var setupMs: Int? {
    guard let accepted, let media = firstMedia, media >= accepted else { return nil }
    return media - accepted
  }
}

/// `quality`: what a client measured of a call, at its end (`final`) or while it lasts.
public struct QualityReport: CallMessageBody, Hashable {
  public var callId: CallID
  public var durationMs: Int?
  /// The last report of this device for this call.
  public var final: Bool
  public var iceRestarts: Int?
  public var jitterMs: Double?
  public var localCandidateType: CandidateType?
  /// Received packets lost, in percent.
  public var lossPercent: Double?
  public var milestones: CallMilestones?
  /// The device's estimate of how the speech it received sounded, 1–5 (an E-model MOS from its
  /// loss, jitter and round trip, protocol.md 7.19).
  public var mos: Double?
  public var receiveKbps: Double?
  public var remoteCandidateType: CandidateType?
  public var rttMs: Double?
  public var sendKbps: Double?

  public init(
    callId: CallID, final: Bool, milestones: CallMilestones? = nil, rttMs: Double? = nil, jitterMs: Double? = nil,
    lossPercent: Double? = nil, sendKbps: Double? = nil, receiveKbps: Double? = nil,
    localCandidateType: CandidateType? = nil, remoteCandidateType: CandidateType? = nil, iceRestarts: Int? = nil,
    durationMs: Int? = nil, mos: Double? = nil
  ) {
    self.mos = mos
    self.callId = callId
    self.final = final
    self.milestones = milestones
    self.rttMs = rttMs
    self.jitterMs = jitterMs
    self.lossPercent = lossPercent
    self.sendKbps = sendKbps
    self.receiveKbps = receiveKbps
    self.localCandidateType = localCandidateType
    self.remoteCandidateType = remoteCandidateType
    self.iceRestarts = iceRestarts
    self.durationMs = durationMs
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", final: false) }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("callId", &callId, .callId)
    try c.integer("durationMs", &durationMs, 0...86_400_000)
    try c.bool("final", &final, absent: false)
    try c.integer("iceRestarts", &iceRestarts, 0...10_000)
    try c.decimal("jitterMs", &jitterMs, 0...60_000)
    try c.enumeration("localCandidateType", &localCandidateType)
    try c.decimal("lossPercent", &lossPercent, 0...100)
    try c.object("milestones", &milestones)
    try c.decimal("mos", &mos, 1...5)
    try c.decimal("receiveKbps", &receiveKbps, 0...100_000)
    try c.enumeration("remoteCandidateType", &remoteCandidateType)
    try c.decimal("rttMs", &rttMs, 0...60_000)
    try c.decimal("sendKbps", &sendKbps, 0...100_000)
  }

  /// Whether the media went through a TURN relay (either side's selected candidate); nil when
  /// the report does not say.
  public var relayed: Bool? {
    guard localCandidateType != nil || remoteCandidateType != nil else { return nil }
    return localCandidateType == .relay || remoteCandidateType == .relay
  }
}

/// One device's quality report for a call, as the history keeps it (`GET /v1/calls/{callId}`).
public struct StoredQualityReport: WireCodable, Hashable {
  public var deviceId: String
  /// ms since the Unix epoch.
  public var receivedAt: Int64
  public var report: QualityReport
  /// `caller` or `callee`.
  public var role: String
  public var userId: String

  public init(userId: String, deviceId: String, role: String, receivedAt: Int64, report: QualityReport) {
    self.userId = userId
    self.deviceId = deviceId
    self.role = role
    self.receivedAt = receivedAt
    self.report = report
  }

  public init(wirePlaceholder _: WirePlaceholder) {
    self.init(userId: "", deviceId: "", role: "", receivedAt: 0, report: QualityReport(callId: "", final: false))
  }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("deviceId", &deviceId, .any)
    try c.integer("receivedAt", &receivedAt, 0...Int64.max)
    try c.object("report", &report)
    try c.string("role", &role, .any)
    try c.string("userId", &userId, .any)
  }
}

/// `GET /v1/calls/{callId}`: one call (in progress or in the history) with its quality reports.
public struct CallDetailResponse: WireCodable, Hashable {
  public var call: CallRecord
  public var quality: [StoredQualityReport]

  public init(call: CallRecord, quality: [StoredQualityReport]) {
    self.call = call
    self.quality = quality
  }

  public init(wirePlaceholder _: WirePlaceholder) {
    self.init(call: CallRecord(wirePlaceholder: WirePlaceholder()), quality: [])
  }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.object("call", &call)
    try c.objects("quality", &quality)
  }
}
