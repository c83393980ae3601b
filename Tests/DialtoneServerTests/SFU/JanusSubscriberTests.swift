import DialtoneJSON
import DialtoneProtocol
import Testing

@testable import DialtoneSFU

/// The bookkeeping of a device's single subscriber connection (protocol.md 20.9): one request
/// to Janus at a time, publisher churn folded into the next one, and the sections of each offer.
@Suite struct JanusSubscriberTests {
  typealias Sections = [UInt64: [String]]

  @Test func theFirstFeedJoinsAndTheNextOnesUpdateTheSameHandleOneOfferAtATime() {
    var subscriber = JanusSubscriber()
    #expect(subscriber.want(7) == .join([7]))
    #expect(subscriber.completed(handle: 100, sections: [7: ["0"]], offered: true) == nil)
    #expect(subscriber.handle == 100 && subscriber.subscribed == [7] && subscriber.negotiation == .awaitingAnswer)
    // Nothing more is asked while the device has not answered Janus's offer.
    #expect(subscriber.want(8) == nil)
    #expect(subscriber.answered() == .update(subscribe: [8], unsubscribe: []))
    #expect(subscriber.completed(sections: [7: ["0"], 8: ["1"]], offered: true) == nil)
    #expect(subscriber.answered() == nil)
    #expect(subscriber.handle == 100 && subscriber.subscribed == [7, 8] && subscriber.mids == [7: ["0"], 8: ["1"]])
    // A feed already on the connection is not asked for again.
    #expect(subscriber.want(8) == nil)
  }

  @Test func publishersComingAndGoingMeanwhileGoTogetherInTheNextRequest() {
    var subscriber = JanusSubscriber()
    #expect(subscriber.want(1) == .join([1]))
    #expect(subscriber.want(3) == nil)
    #expect(subscriber.want(2) == nil)
    #expect(subscriber.completed(handle: 100, sections: [1: ["0"]], offered: true) == nil)
    #expect(subscriber.publisherGone(1) == nil)
    #expect(subscriber.want(4) == nil)
    // Janus takes the departures out first, then the arrivals in (which may reuse "0").
    #expect(subscriber.answered() == .update(subscribe: [2, 3, 4], unsubscribe: ["0"]))
    #expect(subscriber.departing == ["0"])
    let after: Sections = [2: ["0"], 3: ["1"], 4: ["2"]]
    #expect(subscriber.completed(sections: after, offered: true) == nil)
    #expect(subscriber.departing.isEmpty && subscriber.subscribed == [2, 3, 4] && subscriber.mids == after)
  }

  /// A departure is an explicit unsubscribe of the publisher's sections by mid (Janus offers
  /// nothing by itself), also when the publisher left while the request naming it was out.
  @Test func aPublisherThatLeavesHasItsSectionsUnsubscribedEvenMidRequest() {
    var subscriber = JanusSubscriber()
    _ = subscriber.want(1)
    _ = subscriber.completed(handle: 100, sections: [1: ["0", "1"]], offered: true)
    _ = subscriber.answered()
    #expect(subscriber.want(2) == .update(subscribe: [2], unsubscribe: []))
    #expect(subscriber.publisherGone(2) == nil)
    #expect(subscriber.publisherGone(1) == nil)
    // Janus did subscribe 2 before it left: its section goes too, after the answer.
    #expect(subscriber.completed(sections: [1: ["0", "1"], 2: ["2"]], offered: true) == nil)
    #expect(subscriber.answered() == .update(subscribe: [], unsubscribe: ["0", "1", "2"]))
    #expect(subscriber.completed(sections: [:], offered: true) == nil)
    #expect(subscriber.answered() == nil)
    #expect(subscriber.subscribed.isEmpty && subscriber.wanted.isEmpty && subscriber.mids.isEmpty)
    // A later publisher is added on the same connection (Janus reuses the inactive m-lines).
    #expect(subscriber.want(3) == .update(subscribe: [3], unsubscribe: []))
    // Janus's answer without an offer (nothing changed) lets the next request go at once.
    #expect(subscriber.want(4) == nil)
    #expect(subscriber.completed(sections: [3: ["0"]], offered: false) == .update(subscribe: [4], unsubscribe: []))
  }

  @Test func aRefusedFeedIsDroppedAndTheRestAskedForAgain() {
    var subscriber = JanusSubscriber()
    _ = subscriber.want(1)
    _ = subscriber.want(2)
    #expect(subscriber.negotiation == .requesting(.join([1])))
    // The join failed: there is still no handle, so the retry is a join.
    #expect(subscriber.refused(feed: 1) == .join([2]))
    #expect(subscriber.completed(handle: 5, sections: [2: ["0"]], offered: true) == nil)
    #expect(subscriber.answered() == nil)
    #expect(subscriber.handle == 5 && subscriber.subscribed == [2])
    #expect(subscriber.want(3) == .update(subscribe: [3], unsubscribe: []))
    #expect(subscriber.want(4) == nil)
    // A refusal that names no feed drops the whole batch rather than ask for ever.
    #expect(subscriber.refused(feed: nil) == .update(subscribe: [4], unsubscribe: []))
    // A refused update keeps its departures for the next one.
    _ = subscriber.publisherGone(2)
    #expect(subscriber.refused(feed: 4) == .update(subscribe: [], unsubscribe: ["0"]))
  }

  /// Alone in the call, the connection is made on the placeholder (ICE and DTLS done early);
  /// the first real feed comes in one update, beside the placeholder's idle section.
  @Test func theConnectionStartsOnThePlaceholderAndTheFirstFeedComesInOneUpdate() {
    var subscriber = JanusSubscriber(placeholder: 99)
    #expect(subscriber.start() == .join([99]))
    #expect(subscriber.start() == nil)
    #expect(subscriber.completed(handle: 100, sections: [99: ["0"]], offered: true) == nil)
    #expect(subscriber.want(7) == nil)
    #expect(subscriber.answered() == .update(subscribe: [7], unsubscribe: []))
    #expect(subscriber.completed(sections: [99: ["0"], 7: ["1"]], offered: true) == nil)
    #expect(subscriber.subscribed == [7, 99] && subscriber.wanted == [7, 99])
    // A feed arriving while the placeholder's join is out follows as soon as it is answered.
    var early = JanusSubscriber(placeholder: 99)
    _ = early.start()
    #expect(early.want(7) == nil)
    #expect(early.completed(handle: 100, sections: [99: ["0"]], offered: true) == nil)
    #expect(early.answered() == .update(subscribe: [7], unsubscribe: []))
    // Without a placeholder, or with someone to receive already, there is nothing to start.
    var none = JanusSubscriber()
    #expect(none.start() == nil)
    var busy = JanusSubscriber(placeholder: 99)
    _ = busy.want(7)
    #expect(busy.start() == nil)
  }

  @Test func thePlaceholderIsTheRoomsDummyPublisher() throws {
    let listing = try #require(
      JSONValue(
        parsing: Array(
          #"{"participants":[{"id":5,"display":"alice/phone","publisher":true},{"id":77,"display":"Dummy publisher","dummy":true,"publisher":true}]}"#
            .utf8)))
    #expect(JanusSubscriber.placeholder(in: listing) == 77)
    #expect(JanusSubscriber.placeholder(in: nil) == nil)
  }

  @Test func theRefusedFeedIsReadFromJanussReason() {
    #expect(JanusSubscriber.feed(inRefusal: "No such feed (1234567)") == 1_234_567)
    #expect(JanusSubscriber.feed(inRefusal: "No such mid '0' in feed (42)") == 42)
    #expect(JanusSubscriber.feed(inRefusal: "Invalid element") == nil)
    #expect(JanusSubscriber.feed(inRefusal: "No such feed (x)") == nil)
  }

  @Test func theRequestsNameTheRoomWithItsPinAndEachFeed() {
    let join = JanusSubscriber.joinRequest(room: 9, pin: "p", feeds: [1, 2])
    #expect(join["request"]?.stringValue == "join" && join["ptype"]?.stringValue == "subscriber")
    #expect(join["room"]?.intValue == 9 && join["pin"]?.stringValue == "p")
    #expect(join["streams"]?.arrayValue?.compactMap { $0["feed"]?.intValue } == [1, 2])
    #expect(join["autoupdate"]?.boolValue == false)  // Janus offers nothing by itself
    let update = JanusSubscriber.updateRequest(subscribe: [3], unsubscribe: ["0", "1"])
    #expect(update["request"]?.stringValue == "update")
    #expect(update["subscribe"]?.arrayValue?.compactMap { $0["feed"]?.intValue } == [3])
    #expect(update["unsubscribe"]?.arrayValue?.compactMap { $0["sub_mid"]?.stringValue } == ["0", "1"])
    // Janus refuses an empty list: an update without arrivals has no `subscribe` at all.
    let departures = JanusSubscriber.updateRequest(subscribe: [], unsubscribe: ["0"])
    #expect(departures["subscribe"] == nil && departures["unsubscribe"] != nil)
  }

  /// Only live audio and video sections of known participants are listed; an inactive one
  /// (its publisher left, kept for reuse), the data channel and a feed the server does not
  /// know are not.
  @Test func anOffersSectionsNameWhomEachLiveMidCarries() throws {
    let bob = Peer(userId: "bob", deviceId: "laptop")
    let carol = Peer(userId: "carol", deviceId: "phone")
    let summary = try #require(
      JSONValue(
        parsing: Array(
          """
          [{"type":"audio","active":true,"mindex":0,"mid":"0","feed_id":11,"feed_mid":"0"},
           {"type":"video","active":true,"mindex":1,"mid":"1","feed_id":11,"feed_mid":"1"},
           {"type":"audio","active":false,"mindex":2,"mid":"2"},
           {"type":"audio","active":true,"mindex":3,"mid":"3","feed_id":12},
           {"type":"data","active":true,"mindex":4,"mid":"4","sources":1},
           {"type":"audio","active":true,"mindex":5,"mid":"5","feed_id":99}]
          """.utf8)))
    #expect(
      JanusSubscriber.sections(of: summary, participants: [11: bob, 12: carol]) == [
        GroupStreamSection(mid: "0", kind: .audio, from: bob),
        GroupStreamSection(mid: "1", kind: .video, from: bob),
        GroupStreamSection(mid: "3", kind: .audio, from: carol),
      ])
    #expect(JanusSubscriber.sections(of: nil, participants: [11: bob]).isEmpty)
    #expect(JanusSubscriber.mids(of: summary) == [11: ["0", "1"], 12: ["3"], 99: ["5"]])
  }
}

/// A device's subscriber connection that lost its path (protocol.md 20.10): restarted at its next
/// turn, with new ICE credentials or on a new subscription for a fresh connection.
@Suite struct JanusSubscriberRestartTests {
  /// A connection on feeds 1 and 2, nothing under way.
  static func settled() -> JanusSubscriber {
    var subscriber = JanusSubscriber()
    _ = subscriber.want(1)
    _ = subscriber.completed(handle: 100, sections: [1: ["0"]], offered: true)
    _ = subscriber.want(2)
    _ = subscriber.answered()
    _ = subscriber.completed(sections: [1: ["0"], 2: ["1"]], offered: true)
    _ = subscriber.answered()
    return subscriber
  }

  @Test func anIceRestartIsOneOfferOnTheSameHandle() {
    var subscriber = Self.settled()
    #expect(subscriber.restart(.ice) == .restartIce)
    #expect(JanusSubscriber.Request.restartIce.restart == .ice)
    // Janus's reply to a restart lists no sections: they stay as they were.
    #expect(subscriber.completed(sections: [:], offered: true) == nil)
    #expect(subscriber.mids == [1: ["0"], 2: ["1"]])
    #expect(subscriber.negotiation == .awaitingAnswer && subscriber.handle == 100)
    #expect(subscriber.answered() == nil && subscriber.negotiation == .idle)
  }

  @Test func anIceRestartWaitsForTheAnswerUnderWayAndChangesMeanwhileFollowIt() {
    var subscriber = Self.settled()
    #expect(subscriber.want(3) == .update(subscribe: [3], unsubscribe: []))
    #expect(subscriber.restart(.ice) == nil)
    #expect(subscriber.completed(sections: [1: ["0"], 2: ["1"], 3: ["2"]], offered: true) == nil)
    #expect(subscriber.publisherGone(1) == nil)
    // The restart goes first, then the departure.
    #expect(subscriber.answered() == .restartIce)
    #expect(subscriber.completed(sections: [1: ["0"], 2: ["1"], 3: ["2"]], offered: true) == nil)
    #expect(subscriber.answered() == .update(subscribe: [], unsubscribe: ["0"]))
  }

  /// A fresh connection cannot answer the old one's offer: that offer is given up, and a new
  /// handle joins for every feed wanted; only its sections count from then on.
  @Test func aFreshConnectionGetsANewSubscriptionOfEveryFeedAndGivesUpTheOfferOut() {
    var subscriber = Self.settled()
    #expect(subscriber.want(3) == .update(subscribe: [3], unsubscribe: []))
    #expect(subscriber.completed(sections: [1: ["0"], 2: ["1"], 3: ["2"]], offered: true) == nil)
    #expect(subscriber.publisherGone(2) == nil)
    #expect(subscriber.restart(.connection) == .replace([1, 3]))
    #expect(JanusSubscriber.Request.replace([1, 3]).restart == .connection)
    #expect(subscriber.completed(handle: 200, sections: [1: ["0"], 3: ["1"]], offered: true) == nil)
    #expect(subscriber.handle == 200 && subscriber.subscribed == [1, 3] && subscriber.departing.isEmpty)
    #expect(subscriber.mids == [1: ["0"], 3: ["1"]])
    #expect(subscriber.answered() == nil)
  }

  @Test func aRefusedReplacementIsAskedAgainWithoutTheFeedThatLeft() {
    var subscriber = Self.settled()
    #expect(subscriber.restart(.connection) == .replace([1, 2]))
    #expect(subscriber.refused(feed: 2) == .replace([1]))
    #expect(subscriber.completed(handle: 300, sections: [1: ["0"]], offered: true) == nil)
    #expect(subscriber.handle == 300 && subscriber.subscribed == [1])
  }

  @Test func aConnectionNotMadeYetHasNothingToRestart() {
    var subscriber = JanusSubscriber()
    #expect(subscriber.want(1) == .join([1]))
    #expect(subscriber.restart(.connection) == nil)
    #expect(subscriber.restartWanted == nil)
  }
}
