import DialtoneJSON
import DialtoneProtocol

// The overview through the typed codec, like every other HTTP body. Fields in byte-wise key
// order. It is only ever written (the dashboard reads it): a decoded overview has no `ended`
// counts, which are a map of end reasons and go out as a derived member.

private let countRange: ClosedRange<Int64> = 0...Int64.max
private let timeRange: ClosedRange<Int64> = Int64.min...Int64.max
private let measureRange: ClosedRange<Double> = 0...Double.greatestFiniteMagnitude

extension AdminOverview: WireCodable {
  init(wirePlaceholder _: WirePlaceholder) {
    self.init(
      version: "", startedAt: 0, now: 0, sockets: 0, sessions: 0, liveGroupCalls: 0, liveCalls: [], recentCalls: [],
      setupTime: .init(boundsMs: [], counts: [], samples: 0), timeline: .init(bucketSeconds: 0, buckets: []),
      turnShare: .init(relayed: 0, direct: 0))
  }

  mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.objects("liveCalls", &liveCalls)
    try c.integer("liveGroupCalls", &liveGroupCalls, countRange)
    try c.integer("now", &now, timeRange)
    try c.objects("recentCalls", &recentCalls)
    try c.integer("sessions", &sessions, countRange)
    try c.object("setupTime", &setupTime)
    try c.integer("sockets", &sockets, countRange)
    try c.integer("startedAt", &startedAt, timeRange)
    try c.object("timeline", &timeline)
    try c.object("turnShare", &turnShare)
    try c.string("version", &version, .any)
  }
}

extension AdminOverview.LiveCall: WireCodable {
  init(wirePlaceholder _: WirePlaceholder) {
    self.init(callId: "", callerId: "", calleeId: "", state: "", video: false, createdAt: 0, answeredAt: nil)
  }

  mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.integer("answeredAt", &answeredAt, timeRange)
    try c.string("callId", &callId, .any)
    try c.string("calleeId", &calleeId, .any)
    try c.string("callerId", &callerId, .any)
    try c.integer("createdAt", &createdAt, timeRange)
    try c.string("state", &state, .any)
    try c.bool("video", &video)
  }
}

extension AdminOverview.RecentCall: WireCodable {
  init(wirePlaceholder _: WirePlaceholder) {
    self.init(callId: "", callerId: "", calleeId: "", video: false, createdAt: 0)
  }

  mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.integer("answeredAt", &answeredAt, timeRange)
    try c.string("answeredBy", &answeredBy, .any)
    try c.string("callId", &callId, .any)
    try c.string("calleeId", &calleeId, .any)
    try c.string("callerId", &callerId, .any)
    try c.integer("createdAt", &createdAt, timeRange)
    try c.integer("durationMs", &durationMs, countRange)
    try c.string("endReason", &endReason, .any)
    try c.integer("endedAt", &endedAt, timeRange)
    try c.object("quality", &quality)
    try c.bool("video", &video)
  }
}

extension AdminOverview.Quality: WireCodable {
  init(wirePlaceholder _: WirePlaceholder) { self.init(setupMs: nil, rttMs: nil, lossPercent: nil, relayed: nil) }

  mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.decimal("lossPercent", &lossPercent, measureRange)
    try c.decimal("mos", &mos, 1...5)
    try c.bool("relayed", &relayed)
    try c.decimal("rttMs", &rttMs, measureRange)
    try c.integer("setupMs", &setupMs, countRange)
  }
}

extension AdminOverview.SetupTime: WireCodable {
  init(wirePlaceholder _: WirePlaceholder) { self.init(boundsMs: [], counts: [], samples: 0) }

  mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.integers("boundsMs", &boundsMs, countRange)
    try c.integers("counts", &counts, countRange)
    try c.integer("p50Ms", &p50Ms, countRange)
    try c.integer("p90Ms", &p90Ms, countRange)
    try c.integer("samples", &samples, countRange)
  }
}

extension AdminOverview.Bucket: WireCodable {
  init(wirePlaceholder _: WirePlaceholder) {
    self.init(start: 0, ended: [:], pushesSent: 0, pushFailures: 0, relayed: 0, direct: 0)
  }

  mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.integer("direct", &direct, countRange)
    try c.derived("ended", .object(ended.mapValues { .int(Int64($0)) }))
    try c.integer("pushFailures", &pushFailures, countRange)
    try c.integer("pushesSent", &pushesSent, countRange)
    try c.integer("relayed", &relayed, countRange)
    try c.integer("start", &start, timeRange)
  }
}

extension AdminOverview.Timeline: WireCodable {
  init(wirePlaceholder _: WirePlaceholder) { self.init(bucketSeconds: 0, buckets: []) }

  mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.integer("bucketSeconds", &bucketSeconds, countRange)
    try c.objects("buckets", &buckets)
  }
}

extension AdminOverview.TurnShare: WireCodable {
  init(wirePlaceholder _: WirePlaceholder) { self.init(relayed: 0, direct: 0) }

  mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.integer("direct", &direct, countRange)
    try c.integer("relayed", &relayed, countRange)
  }
}
