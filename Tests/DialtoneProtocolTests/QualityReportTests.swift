import DialtoneProtocol
import Testing

@Suite struct QualityReportTests {
  @Test func outOfRangeAndWronglyTypedFieldsAreRefusedByName() {
    let cases: [(String, String)] = [
      (#""lossPercent":150"#, #""lossPercent" must be a number from 0 to 100"#),
      (#""rttMs":-1"#, #""rttMs" must be a number from 0 to 60000"#),
      (#""mos":0.5"#, #""mos" must be a number from 1 to 5"#),
      (#""mos":"good""#, #""mos" must be a number"#),
      (#""rttMs":"fast""#, #""rttMs" must be a number"#),
      (#""localCandidateType":"tunnel""#, #""localCandidateType" must be one of host, srflx, prflx, relay"#),
      (#""milestones":{"firstAudio":3600001}"#, #""milestones.firstAudio" must be an integer from 0 to 3600000"#),
      (#""milestones":[]"#, #""milestones" must be an object"#),
      (#""final":"yes""#, #""final" must be a boolean"#),
    ]
    for (field, problem) in cases {
      let text = #"{"type":"quality","id":"q","callId":"c-1","# + field + "}"
      do {
        _ = try MessageCodec.decodeClientMessage(text)
        Issue.record("\(field) was accepted")
      } catch {
        #expect(error.code == .badRequest)
        #expect(error.message == problem, "\(field)")
      }
    }
  }

  @Test func unknownMilestonesAndFieldsAreIgnoredAndAbsentFinalIsFalse() throws {
    let frame = try MessageCodec.decodeClientMessage(
      #"{"type":"quality","id":"q","callId":"c-1","milestones":{"firstAudio":12,"warp":3},"mos":4.2}"#)
    guard case .quality(let report) = frame.message else {
      Issue.record("not a quality message")
      return
    }
    #expect(report.final == false)
    #expect(report.milestones == CallMilestones(firstAudio: 12))
    #expect(report.mos == 4.2)
  }

  @Test func setUpTimeIsAcceptToFirstMediaAndRelayedIsEitherSide() {
    #expect(CallMilestones(accepted: 100, firstAudio: 450, firstVideo: 300).setupMs == 200)
    #expect(CallMilestones(accepted: 500, firstAudio: 450).setupMs == nil)
    #expect(CallMilestones(firstAudio: 450).setupMs == nil)
    #expect(
      QualityReport(callId: "c", final: true, localCandidateType: .host, remoteCandidateType: .relay).relayed == true)
    #expect(QualityReport(callId: "c", final: true, localCandidateType: .srflx).relayed == false)
    #expect(QualityReport(callId: "c", final: true).relayed == nil)
  }
}
