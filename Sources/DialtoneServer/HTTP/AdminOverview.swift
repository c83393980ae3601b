import DialtoneProtocol

/// `GET /admin/api/overview`: what the dashboard shows (docs/protocol.md §16.8).
struct AdminOverview: Equatable, Sendable {
  struct LiveCall: Equatable, Sendable {
    var callId: String
    var callerId: String
    var calleeId: String
    var state: String
    var video: Bool
    var createdAt: Int64
    var answeredAt: Int64?
  }

  /// A call of the history with a summary of its final quality reports.
  struct RecentCall: Equatable, Sendable {
    var callId: String
    var callerId: String
    var calleeId: String
    var answeredBy: String?
    var video: Bool
    var createdAt: Int64
    var answeredAt: Int64?
    var endedAt: Int64?
    var endReason: String?
    var durationMs: Int64?
    var quality: Quality?
  }

  struct Quality: Equatable, Sendable {
    var setupMs: Int?
    var rttMs: Double?
    var lossPercent: Double?
    /// The lower of the two sides' speech estimates (protocol.md 7.19).
    var mos: Double?
    var relayed: Bool?
  }

  struct SetupTime: Equatable, Sendable {
    var boundsMs: [Int64]
    var counts: [Int64]
    var samples: Int
    var p50Ms: Int?
    var p90Ms: Int?
  }

  struct Bucket: Equatable, Sendable {
    var start: Int64
    var ended: [String: Int]
    var pushesSent: Int
    var pushFailures: Int
    var relayed: Int
    var direct: Int
  }

  struct Timeline: Equatable, Sendable {
    var bucketSeconds: Int64
    var buckets: [Bucket]
  }

  struct TurnShare: Equatable, Sendable {
    var relayed: Int
    var direct: Int
  }

  var version: String
  var startedAt: Int64
  var now: Int64
  var sockets: Int
  var sessions: Int
  var liveGroupCalls: Int
  var liveCalls: [LiveCall]
  var recentCalls: [RecentCall]
  var setupTime: SetupTime
  var timeline: Timeline
  var turnShare: TurnShare
}

extension AdminOverview.Quality {
  /// The worse of the two sides: the longest set-up, the highest RTT and loss, the lowest MOS; relayed if
  /// either side was. Interim reports count when no final one came.
  init?(_ reports: [StoredQualityReport]) {
    let finals = reports.filter(\.report.final)
    let used = (finals.isEmpty ? reports : finals).map(\.report)
    guard !used.isEmpty else { return nil }
    setupMs = used.compactMap { $0.milestones?.setupMs }.max()
    rttMs = used.compactMap(\.rttMs).max()
    lossPercent = used.compactMap(\.lossPercent).max()
    mos = used.compactMap(\.mos).min()
    let paths = used.compactMap(\.relayed)
    relayed = paths.isEmpty ? nil : paths.contains(true)
  }
}
