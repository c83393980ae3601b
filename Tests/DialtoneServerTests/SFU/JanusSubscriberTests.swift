import DialtoneJSON
import DialtoneProtocol
import Testing

@testable import DialtoneSFU

/// The bookkeeping of a device's single subscriber connection (protocol.md 20.9): one request
/// to Janus at a time, publisher churn folded into the next one, and the sections of each offer.
@Suite struct JanusSubscriberTests {
  @Test func theFirstFeedJoinsAndTheNextOnesSubscribeOnTheSameHandle() {
    var subscriber = JanusSubscriber()
    #expect(subscriber.want(7) == .join([7]))
    #expect(subscriber.completed(handle: 100) == nil)
    #expect(subscriber.handle == 100 && subscriber.subscribed == [7])
    #expect(subscriber.want(8) == .subscribe([8]))
    #expect(subscriber.completed() == nil)
    #expect(subscriber.handle == 100 && subscriber.subscribed == [7, 8])
    // A feed already on the connection is not asked for again.
    #expect(subscriber.want(8) == nil)
  }

  @Test func publishersArrivingWhileARequestIsOutGoTogetherInTheNextOne() {
    var subscriber = JanusSubscriber()
    #expect(subscriber.want(1) == .join([1]))
    #expect(subscriber.want(3) == nil)
    #expect(subscriber.want(2) == nil)
    #expect(subscriber.completed(handle: 100) == .subscribe([2, 3]))
    #expect(subscriber.want(4) == nil)
    #expect(subscriber.completed() == .subscribe([4]))
    #expect(subscriber.completed() == nil)
    #expect(subscriber.subscribed == [1, 2, 3, 4] && subscriber.inFlight == nil)
  }

  /// Janus drops a departed publisher's streams itself (and offers that); the bookkeeping
  /// only forgets the feed, also when it left while a request naming it was out.
  @Test func aPublisherThatLeavesIsForgottenEvenMidRequest() {
    var subscriber = JanusSubscriber()
    _ = subscriber.want(1)
    _ = subscriber.completed(handle: 100)
    _ = subscriber.want(2)
    subscriber.publisherGone(2)
    subscriber.publisherGone(1)
    #expect(subscriber.completed() == nil)
    #expect(subscriber.subscribed.isEmpty && subscriber.wanted.isEmpty)
    // A later publisher is added on the same connection (Janus reuses the inactive m-lines).
    #expect(subscriber.want(3) == .subscribe([3]))
  }

  @Test func aRefusedFeedIsDroppedAndTheRestAskedForAgain() {
    var subscriber = JanusSubscriber()
    _ = subscriber.want(1)
    _ = subscriber.want(2)
    #expect(subscriber.inFlight == .join([1]))
    // The join failed: there is still no handle, so the retry is a join.
    #expect(subscriber.refused(feed: 1) == .join([2]))
    #expect(subscriber.completed(handle: 5) == nil)
    #expect(subscriber.handle == 5 && subscriber.subscribed == [2])
    #expect(subscriber.want(3) == .subscribe([3]))
    #expect(subscriber.want(4) == nil)
    // A refusal that names no feed drops the whole batch rather than ask for ever.
    #expect(subscriber.refused(feed: nil) == .subscribe([4]))
    #expect(subscriber.completed() == nil)
    #expect(subscriber.wanted == [2, 4] && subscriber.subscribed == [2, 4])
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
    #expect(join["autoupdate"] == nil)  // Janus's default (true): it offers departures itself
    let subscribe = JanusSubscriber.subscribeRequest(feeds: [3])
    #expect(subscribe["request"]?.stringValue == "subscribe")
    #expect(subscribe["streams"]?.arrayValue?.compactMap { $0["feed"]?.intValue } == [3])
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
  }
}
