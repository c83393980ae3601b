import Foundation

/// One entry of a W3C WebRTC stats report (`RTCStatisticsReport` on iOS), as plain values, so
/// the folding into `PeerConnectionStats` is the same code, tested on Linux, for every engine
/// that produces such reports.
public struct StatsReportEntry: Sendable, Equatable {
  public enum Value: Sendable, Equatable {
    case number(Double)
    case string(String)
    case bool(Bool)
  }

  public var id: String
  /// "transport", "candidate-pair", "local-candidate", "inbound-rtp", …
  public var type: String
  public var values: [String: Value]

  public init(id: String, type: String, values: [String: Value]) {
    self.id = id
    self.type = type
    self.values = values
  }

  func number(_ key: String) -> Double? {
    switch values[key] {
    case .number(let n)?: return n
    case .bool(let b)?: return b ? 1 : 0
    default: return nil
    }
  }

  func string(_ key: String) -> String? {
    if case .string(let s)? = values[key] { return s }
    return nil
  }

  func flag(_ key: String) -> Bool {
    switch values[key] {
    case .bool(let b)?: return b
    case .number(let n)?: return n != 0
    default: return false
    }
  }
}

extension PeerConnectionStats {
  /// Folds a stats report: bytes from the transports, the selected candidate pair (the
  /// transport's `selectedCandidatePairId`, else a nominated succeeded pair) for round-trip
  /// time and candidate types, packets and jitter from the RTP streams.
  public init(folding entries: [StatsReportEntry]) {
    self.init()
    var byId: [String: StatsReportEntry] = [:]
    for entry in entries { byId[entry.id] = entry }
    var selectedPairId: String?
    var jitters: [Double] = []
    for entry in entries {
      switch entry.type {
      case "transport":
        bytesSent += Self.count(entry.number("bytesSent"))
        bytesReceived += Self.count(entry.number("bytesReceived"))
        if let id = entry.string("selectedCandidatePairId") { selectedPairId = id }
      case "inbound-rtp":
        packetsReceived += Self.count(entry.number("packetsReceived"))
        if let lost = entry.number("packetsLost"), lost.isFinite { packetsLost += Int64(lost) }
        if let jitter = entry.number("jitter"), jitter.isFinite, jitter >= 0 { jitters.append(jitter) }
        if entry.string("kind") == "video" {
          Self.foldInboundVideo(entry, into: &video)
          if video?.codec == nil { video?.codec = Self.codec(of: entry, in: byId) }
        } else if entry.string("kind") == "audio", audioCodec == nil {
          // Not libwebrtc's packetsDiscarded: it counts RED's copies of packets it already had
          // (243 of 250 on a clean call from the CLI), so it cannot stand for late audio.
          audioCodec = Self.codec(of: entry, in: byId)?.lowercased()
        }
      case "outbound-rtp":
        packetsSent += Self.count(entry.number("packetsSent"))
        if entry.string("kind") == "video" {
          Self.foldOutboundVideo(entry, into: &video)
          // What is sent names the call's codec even when a received one was seen first.
          if let codec = Self.codec(of: entry, in: byId) { video?.codec = codec }
        }
      default:
        break
      }
    }
    if !jitters.isEmpty { jitter = jitters.max() }
    let pair =
      selectedPairId.flatMap { byId[$0] }
      ?? entries.filter { $0.type == "candidate-pair" && $0.flag("nominated") && $0.string("state") == "succeeded" }
      .min { $0.id < $1.id }
    guard let pair else { return }
    roundTripTime = pair.number("currentRoundTripTime")
    if let local = pair.string("localCandidateId").flatMap({ byId[$0] }) {
      localCandidateType = local.string("candidateType")
      transport = local.string("protocol")?.lowercased()
    }
    if let remote = pair.string("remoteCandidateId").flatMap({ byId[$0] }) {
      remoteCandidateType = remote.string("candidateType")
    }
  }

  private static func foldInboundVideo(_ entry: StatsReportEntry, into video: inout VideoStats?) {
    var v = video ?? VideoStats()
    v.bytesReceived += count(entry.number("bytesReceived"))
    if let lost = entry.number("packetsLost"), lost.isFinite { v.packetsLost += Int64(lost) }
    v.framesDecoded += count(entry.number("framesDecoded"))
    v.frameWidth = Int(count(entry.number("frameWidth")))
    v.frameHeight = Int(count(entry.number("frameHeight")))
    if let fps = entry.number("framesPerSecond"), fps.isFinite, fps >= 0 { v.framesPerSecond = fps }
    v.freezes += Int(count(entry.number("freezeCount")))
    v.nacksSent += count(entry.number("nackCount"))
    v.plisSent += count(entry.number("pliCount"))
    video = v
  }

  private static func foldOutboundVideo(_ entry: StatsReportEntry, into video: inout VideoStats?) {
    var v = video ?? VideoStats()
    v.bytesSent += count(entry.number("bytesSent"))
    v.nacksReceived += count(entry.number("nackCount"))
    v.plisReceived += count(entry.number("pliCount"))
    v.targetBitrate += Int(count(entry.number("targetBitrate")))
    video = v
  }

  /// The MIME subtype of an RTP stream's codec entry ("video/H264" → "H264").
  private static func codec(of entry: StatsReportEntry, in byId: [String: StatsReportEntry]) -> String? {
    guard let mime = entry.string("codecId").flatMap({ byId[$0] })?.string("mimeType") else { return nil }
    return mime.split(separator: "/").last.map(String.init)
  }

  private static func count(_ value: Double?) -> UInt64 {
    guard let value, value.isFinite, value > 0, value < 1.8e19 else { return 0 }
    return UInt64(value)
  }
}
