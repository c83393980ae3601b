import DialtoneMetrics
import DialtoneNet
import DialtoneProtocol
import DialtoneStorage
import DialtoneSupport
import Foundation

/// The admin dashboard: `GET /admin` (the page, `Resources/admin.html`) and
/// `GET /admin/api/overview` (its data), both behind `--admin-token`. Without one configured
/// both answer 404: there is no default credential.
struct AdminRoutes {
  let credential: SharedSecretCredential?
  let hub: SignalingHub
  let observations: Observations
  let store: any QualityStore
  let clock: any DialtoneClock
  let version: String
  let webRoot: String?

  static let recentCallCount = 50

  func register(in router: inout Router) {
    let page = WebPage(fileName: "admin.html", embedded: PackageResources.admin_html, root: webRoot)
    router.add(.GET, "/admin") { request in
      try authorize(request)
      return HTTPResponse(status: 200, contentType: "text/html; charset=utf-8", body: page.body())
    }
    router.add(.GET, "/admin/api/overview") { request in
      try authorize(request)
      return .wire(try await overview())
    }
  }

  private func authorize(_ request: HTTPRequest) throws(HTTPError) {
    guard let credential else {
      throw .notFound("the admin dashboard is off: start the server with --admin-token")
    }
    try credential.check(request)
  }

  private func overview() async throws -> AdminOverview {
    let live = await hub.liveOverview()
    let recent = try await store.recentCalls(limit: Self.recentCallCount)
    let now = clock.now
    let setup = observations.setupTimes.summary
    let paths = observations.metrics.mediaPaths
    return AdminOverview(
      version: version, startedAt: observations.startedAt.millisecondsSince1970, now: now.millisecondsSince1970,
      sockets: live.sockets, sessions: live.sessions, liveGroupCalls: live.groupCalls,
      liveCalls: live.calls.map {
        .init(
          callId: $0.callId, callerId: $0.callerId, calleeId: $0.calleeId, state: $0.state.rawValue, video: $0.video,
          createdAt: $0.createdAt, answeredAt: $0.answeredAt)
      },
      recentCalls: recent.map { record, reports in
        .init(
          callId: record.callId, callerId: record.callerId, calleeId: record.calleeId, answeredBy: record.answeredBy,
          video: record.video, createdAt: record.createdAt, answeredAt: record.answeredAt, endedAt: record.endedAt,
          endReason: record.endReason?.rawValue, durationMs: record.durationMs, quality: .init(reports))
      },
      setupTime: .init(
        boundsMs: SetupTimeSamples.boundsMs.map(Int64.init), counts: setup.counts.map(Int64.init),
        samples: setup.samples, p50Ms: setup.p50Ms, p90Ms: setup.p90Ms),
      timeline: .init(
        bucketSeconds: observations.timeline.bucketSeconds,
        buckets: observations.timeline.snapshot(now: now).map {
          .init(
            start: $0.start, ended: $0.ended, pushesSent: $0.pushesSent, pushFailures: $0.pushFailures,
            relayed: $0.relayed, direct: $0.direct)
        }),
      turnShare: .init(
        relayed: Int(paths.labels("relay").current), direct: Int(paths.labels("direct").current)))
  }
}
