import DialtoneClient
import DialtoneClientLinux
import DialtoneCommandLine
import DialtoneGStreamer
import DialtoneHTTPClient
import DialtoneJSON
import DialtoneNet
import DialtoneProtocol
import Foundation

/// `dialtone call` and `dialtone answer`: a headless softphone over the SDK (CallClient,
/// CallEngine) with GStreamer media.
enum SoftphoneCommand {
  static func call(_ arguments: ArgumentList) async throws -> Int32 {
    let to = try arguments.required("to")
    return try await run(arguments, role: .caller(to: to))
  }

  static func answer(_ arguments: ArgumentList) async throws -> Int32 {
    try await run(arguments, role: .callee(auto: arguments.flag("auto")))
  }

  static func groupCall(_ arguments: ArgumentList) async throws -> Int32 {
    let members = try arguments.required("to").split(separator: ",").map {
      $0.trimmingCharacters(in: .whitespaces)
    }.filter { !$0.isEmpty }
    guard !members.isEmpty else { throw ArgumentError(message: "--to expects user ids, e.g. --to bob,carol") }
    return try await run(
      arguments,
      role: .group(.create(members: members, title: arguments.string("title"))))
  }

  static func groupJoin(_ arguments: ArgumentList) async throws -> Int32 {
    let callId = try arguments.required("call-id")
    guard CallIDRules.isValid(callId) else { throw ArgumentError(message: "\"\(callId)\" is not a call id") }
    return try await run(arguments, role: .group(.join(callId)))
  }

  static func roomJoin(_ arguments: ArgumentList) async throws -> Int32 {
    try await run(arguments, role: .group(.room(try arguments.required("name"))))
  }

  private static func run(_ arguments: ArgumentList, role: SoftphoneCall.Role) async throws -> Int32 {
    let server = try arguments.required("server")
    let token = try arguments.required("token")
    let duration = try arguments.double("duration", default: 0)
    guard duration >= 0 else { throw ArgumentError(message: "--duration must be positive") }
    let urls = try ServerURLs(server)
    let audio = try audioSource(
      arguments.string("audio") ?? "tone", frequency: try arguments.double("tone-frequency", default: 440))
    let recorder: WAVWriter? = arguments.string("record").map { WAVWriter(path: $0) }
    var remoteAudio: (@Sendable (RemoteAudio) -> Void)?
    if let recorder { remoteAudio = { recorder.append($0) } }
    // Group calls keep each remote participant's audio apart.
    let participants = ParticipantAudio(recordPath: arguments.string("record"))
    // --video: a video call (and its camera); --camera: a camera for upgrading an audio call.
    var camera: GStreamerMedia.VideoSource?
    for option in ["video", "camera"] {
      guard camera == nil, let picture = arguments.string(option) else { continue }
      camera = try videoSource(
        picture, option: option, size: arguments.string("video-size"),
        framerate: arguments.string("video-fps"))
    }
    var media = GStreamerMedia(
      audio: audio, relayOnly: arguments.flag("relay-only"),
      remoteAudio: remoteAudio, participantAudio: { participants.sink(for: $0) }, video: camera)
    if let codec = arguments.string("video-codec") {
      guard let chosen = VideoCodec(rawValue: codec.lowercased()) else {
        throw ArgumentError(message: "--video-codec expects vp8 or h264")
      }
      media.videoCodec = chosen
    }
    media.recordVideo = arguments.string("record-video")
    if let text = arguments.string("audio-profile") {
      try AudioProfileOption.apply(text, to: &media)
    }
    let report = MilestoneReport(json: arguments.flag("json"))
    let log = try sdkLog(arguments)

    // Everything slow happens before dialing: the DTLS certificate, signaling, ICE servers.
    await GStreamerRuntime.prepare()
    let network = try WebSocketClient()
    let http = HTTPClient(configuration: .init(http2: false))
    let signaling = SignalingClient(
      configuration: .init(url: urls.webSocket),
      transport: LWSSignalingTransport(client: network), log: log
    ) { token }
    let iceServers = IceServerCache(defaults: []) {
      try await fetchIceServers(http: http, url: urls.iceServers, token: token)
    }
    let factory = GStreamerPeerConnectionFactory(media: media)
    var configuration = CallClient.Configuration()
    configuration.log = log
    // --no-trickle: the slow baseline (gather everything, then send it in the offer/answer).
    configuration.policy.trickle = !arguments.flag("no-trickle")
    // Connect while ringing, so Answer only switches media on (protocol.md 11), unless
    // --no-preconnect (today's flow, for comparisons); legs also need trickle (the engine
    // checks). An auto-answering callee accepts at once: a leg would only compete with the
    // call's own negotiation for the CPU.
    var answersAtOnce = false
    if case .callee(let auto) = role { answersAtOnce = auto }
    configuration.policy.preconnect = !arguments.flag("no-preconnect") && !answersAtOnce
    // A ringing callee's leg is relay-only (the caller learns no address of it before Answer;
    // without TURN it asks for none) unless --no-private-preconnect.
    configuration.policy.privatePreconnect = !arguments.flag("no-private-preconnect")
    configuration.policy.dataChannel = true  // stdin lines travel over it
    configuration.groupMultistream = !arguments.flag("no-multistream")
    configuration.policy.reportsQuality = !arguments.flag("no-quality-report")
    if let text = arguments.string("quality-interval") {
      guard let seconds = Double(text), seconds >= 1, seconds <= 3600 else {
        throw ArgumentError(message: "--quality-interval expects 1...3600 seconds")
      }
      configuration.policy.qualityReportInterval = .milliseconds(Int(seconds * 1000))
    }
    let client = CallClient(
      signaling: signaling, iceServers: iceServers, factory: factory, configuration: configuration)
    let call = SoftphoneCall(
      client: client, factory: factory, role: role, duration: duration, report: report,
      participantAudio: participants, endForAll: arguments.flag("end-for-all"),
      video: arguments.string("video") != nil)
    ProcessSignals.onTermination { _ in Task { await call.interrupt() } }
    let pathWatch = InterfaceWatch.start { [client, report] in
      report.note("network changed: reconnecting signaling")
      await client.networkChanged()
    }

    let status = await call.run()
    pathWatch.cancel()
    await client.stop()
    await factory.shutdown()
    var groupRecordings: [String] = []
    do {
      groupRecordings = try participants.finish()
      for path in groupRecordings { report.note("recorded \(path)") }
    } catch {
      report.note("could not write a participant's recording: \(error)")
    }
    // A group call writes one file per participant instead.
    if let recorder, groupRecordings.isEmpty, !role.isGroup {
      do {
        try recorder.finish()
        let summary = recorder.summary
        report.event(
          "recorded",
          [
            "path": .string(recorder.path), "seconds": .double(summary.total), "lateSeconds": .double(summary.late),
            "silentSeconds": .double(summary.silent),
          ],
          text: String(
            format: "recorded %@: %.1f s, %.2f s came too late to play, %.2f s of silence for what did not come",
            recorder.path, summary.total, summary.late, summary.silent))
      } catch {
        report.note("could not write \(recorder.path): \(error)")
      }
    }
    http.shutdown()
    await network.shutdown()
    return status
  }

  private static func audioSource(_ value: String, frequency: Double) throws -> GStreamerMedia.AudioSource {
    switch value {
    case "tone": return .tone(frequency: frequency)
    case "silence": return .silence
    default:
      guard FileManager.default.isReadableFile(atPath: value) else {
        throw ArgumentError(message: "--audio expects tone, silence or a readable WAV file, got \"\(value)\"")
      }
      return .wavFile(path: value)
    }
  }

  /// `--video`/`--camera`: a test pattern or a readable video file, at `--video-size WxH`
  /// (default 640x360) and `--video-fps N` (default 30).
  private static func videoSource(_ picture: String, option: String, size: String?, framerate: String?) throws
    -> GStreamerMedia.VideoSource
  {
    let content: GStreamerMedia.VideoSource.Content
    if GStreamerMedia.VideoSource.patterns.contains(picture) {
      content = .pattern(picture)
    } else if FileManager.default.isReadableFile(atPath: picture) {
      content = .file(picture)
    } else {
      throw ArgumentError(
        message:
          "--\(option) expects a readable video file or a pattern: "
          + GStreamerMedia.VideoSource.patterns.sorted().joined(separator: ", "))
    }
    var source = GStreamerMedia.VideoSource(content: content)
    if let size {
      let parts = size.lowercased().split(separator: "x")
      guard parts.count == 2, let width = Int(parts[0]), let height = Int(parts[1]), (16...1920).contains(width),
        (16...1080).contains(height), width % 2 == 0, height % 2 == 0
      else { throw ArgumentError(message: "--video-size expects WIDTHxHEIGHT, even, up to 1920x1080 (e.g. 1280x720)") }
      source.width = width
      source.height = height
    }
    if let framerate {
      guard let fps = Int(framerate), (1...60).contains(fps) else {
        throw ArgumentError(message: "--video-fps expects a frame rate from 1 to 60")
      }
      source.framerate = fps
    }
    return source
  }

  private static func fetchIceServers(http: HTTPClient, url: String, token: String) async throws -> (
    servers: [IceServer], ttl: Int
  ) {
    let response = try await http.send(
      HTTPClientRequest(method: "GET", url: url, headers: [("Authorization", "Bearer \(token)")]))
    guard response.status == 200 else { throw HTTPClientError("GET /v1/ice-servers: HTTP \(response.status)") }
    let body = try IceServersResponse(jsonBytes: response.body, options: .lenient)
    return (body.iceServers, body.ttl)
  }
}

/// The server's endpoints from `--server` (`http://host:port`, `ws://host:port` or either with a path).
struct ServerURLs {
  let webSocket: String
  let iceServers: String

  init(_ server: String) throws {
    guard var components = URLComponents(string: server), let scheme = components.scheme, components.host != nil else {
      throw ArgumentError(message: "--server expects a URL like http://127.0.0.1:8080, got \"\(server)\"")
    }
    let secure = scheme == "https" || scheme == "wss"
    components.path = ""
    components.query = nil
    components.scheme = secure ? "wss" : "ws"
    guard let base = components.string else { throw ArgumentError(message: "--server: bad URL \"\(server)\"") }
    webSocket = base + "/v1/ws"
    components.scheme = secure ? "https" : "http"
    iceServers = (components.string ?? base) + "/v1/ice-servers"
  }
}
