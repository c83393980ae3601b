import DialtoneCalls
import DialtoneMetrics
import DialtoneProtocol
import DialtoneSessions
import DialtoneStorage
import DialtoneSupport
import Foundation

/// Quality reports: checked against the call they are about, stored off the hub's thread, and
/// answered once on disk (a retry meanwhile is not answered twice: `OutcomeGate.expect`).
final class QualityIntake {
  /// Where the answer goes: the reporting session here, or the node that forwarded the report
  /// (the call runs here).
  enum Answer: Sendable {
    case session(String)
    case forwarded(ForwardedRequest)
  }

  private let quality: any QualityStore
  private let outcomes: OutcomeGate
  private let observations: Observations
  private let clock: any DialtoneClock
  private let mailbox: HubMailbox
  private let log: Log

  init(
    quality: any QualityStore, outcomes: OutcomeGate, observations: Observations, clock: any DialtoneClock,
    mailbox: HubMailbox, log: Log
  ) {
    self.quality = quality
    self.outcomes = outcomes
    self.observations = observations
    self.clock = clock
    self.mailbox = mailbox
    self.log = log
  }

  func take(_ report: QualityReport, id: String, from who: Identity, call: CallState?, answer: Answer) {
    guard let call else {
      let reply = ServerMessage.error(
        .init(
          replyTo: id, code: .notFound,
          message: "no call \(report.callId) of yours is in progress or ended in the last 10 minutes",
          callId: report.callId))
      observations.metrics.messagesRefused.labels(ErrorCode.notFound.rawValue).increment()
      return respond(reply, requestID: id, answer)
    }
    let stored = StoredQualityReport(
      userId: who.userId, deviceId: who.deviceId, role: call.callerId == who.userId ? "caller" : "callee",
      receivedAt: clock.now.millisecondsSince1970, report: report)
    if case .session(let sessionID) = answer { outcomes.expect(sessionID, id) }
    let mailbox = mailbox
    let answered: @Sendable (ServerMessage) -> Void
    switch answer {
    case .session(let sessionID):
      answered = { mailbox.post(.replyArrived(sessionID: sessionID, requestID: id, reply: $0)) }
    case .forwarded(let request):
      answered = { mailbox.post(.forwardedAnswered(request, $0)) }
    }
    Self.storeInBackground(stored, id: id, in: quality, observations: observations, log: log, then: answered)
  }

  private static func storeInBackground(
    _ stored: StoredQualityReport, id: String, in quality: any QualityStore, observations: Observations, log: Log,
    then answered: @escaping @Sendable (ServerMessage) -> Void
  ) {
    Task { answered(await store(stored, id: id, in: quality, observations: observations, log: log)) }
  }

  private func respond(_ reply: ServerMessage, requestID: String, _ answer: Answer) {
    switch answer {
    case .session(let sessionID): outcomes.arrived(reply, sessionID, requestID)
    case .forwarded(let request): outcomes.answer(request, with: reply)
    }
  }

  private static func store(
    _ stored: StoredQualityReport, id: String, in quality: any QualityStore, observations: Observations, log: Log
  ) async -> ServerMessage {
    let callId = stored.report.callId
    let reply: ServerMessage
    do {
      switch try await quality.recordQuality(
        callId: callId, stored, maxDevicesPerCall: QualityReportLimits.devicesPerCall)
      {
      case .stored:
        observations.qualityStored(stored)
        reply = .ack(.init(replyTo: id, callId: callId))
      case .finalAlreadyStored:
        reply = .error(
          .init(
            replyTo: id, code: .invalidState, message: "this device already sent its final report for the call",
            callId: callId))
      case .tooManyDevices:
        reply = .error(
          .init(
            replyTo: id, code: .limitExceeded,
            message: "at most \(QualityReportLimits.devicesPerCall) devices report on one call", callId: callId))
      }
    } catch {
      log.error("cannot store a quality report for call \(callId): \(error)", callId: callId)
      reply = .error(
        .init(replyTo: id, code: .internal, message: "the report could not be stored; try again", callId: callId))
    }
    if case .error(let error) = reply { observations.metrics.messagesRefused.labels(error.code.rawValue).increment() }
    return reply
  }
}
