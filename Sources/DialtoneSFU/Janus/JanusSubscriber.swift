import DialtoneJSON
import DialtoneProtocol

/// The bookkeeping of one device's single subscriber connection (protocol.md 20.9), as a pure
/// value: which publishers' feeds it should carry, which Janus was asked for, and the one
/// request at a time that gets Janus there.
///
/// Feeds are only ever added by a request: when a publisher leaves (or is kicked), Janus itself
/// turns its m-lines inactive and offers the change (the subscriber's `autoupdate`, on by
/// default), so a feed that goes away is only forgotten here. Publishers that start while a
/// request is on its way wait for it and then go to Janus together in the next one.
package struct JanusSubscriber: Sendable, Equatable {
  package enum Request: Sendable, Equatable {
    /// Attach a handle and join the room as a subscriber of these feeds.
    case join([UInt64])
    /// Add these feeds to the joined subscription (VideoRoom `subscribe`).
    case subscribe([UInt64])

    package var feeds: [UInt64] {
      switch self {
      case .join(let feeds), .subscribe(let feeds): return feeds
      }
    }
  }

  /// The subscriber handle, once a `join` succeeded.
  package private(set) var handle: UInt64?
  /// The feeds the connection should carry: every other participant whose media is up.
  package private(set) var wanted: Set<UInt64> = []
  /// The feeds Janus subscribed the connection to (until their publisher left).
  package private(set) var subscribed: Set<UInt64> = []
  /// The request on its way to Janus.
  package private(set) var inFlight: Request?

  package init() {}

  /// A publisher's media is up: the connection should carry it. Returns the request to send now.
  package mutating func want(_ feed: UInt64) -> Request? {
    wanted.insert(feed)
    return next()
  }

  /// A publisher left: Janus drops its streams from the subscription by itself.
  package mutating func publisherGone(_ feed: UInt64) {
    wanted.remove(feed)
    subscribed.remove(feed)
  }

  /// The request in flight succeeded (`handle`: the one a `join` made). Returns the next one.
  package mutating func completed(handle: UInt64? = nil) -> Request? {
    guard let request = inFlight else { return nil }
    inFlight = nil
    if case .join = request, let handle { self.handle = handle }
    // A feed whose publisher left meanwhile is gone from the subscription too.
    subscribed.formUnion(request.feeds.filter(wanted.contains))
    return next()
  }

  /// Janus refused the request because `feed` is no such feed (its publisher left, or its
  /// media is not up yet; nil when Janus did not say which): the others are asked for again.
  package mutating func refused(feed: UInt64?) -> Request? {
    guard let request = inFlight else { return nil }
    inFlight = nil
    if let feed {
      wanted.remove(feed)
    } else {
      // Which one is unknown: drop the whole batch rather than ask again for ever.
      wanted.subtract(request.feeds)
    }
    return next()
  }

  private mutating func next() -> Request? {
    guard inFlight == nil else { return nil }
    let missing = wanted.subtracting(subscribed).sorted()
    guard !missing.isEmpty else { return nil }
    let request: Request = handle == nil ? .join(missing) : .subscribe(missing)
    inFlight = request
    return request
  }

  // MARK: - Janus's side

  /// VideoRoom's subscriber `join` of a call's room for `feeds`.
  package static func joinRequest(room: UInt64, pin: String, feeds: [UInt64]) -> JSONValue {
    [
      "request": "join", "ptype": "subscriber", "room": .int(Int64(room)), "pin": .string(pin),
      "streams": .array(feeds.map { ["feed": .int(Int64($0))] }),
    ]
  }

  /// VideoRoom's `subscribe`: more feeds on the same connection (a renegotiation).
  package static func subscribeRequest(feeds: [UInt64]) -> JSONValue {
    ["request": "subscribe", "streams": .array(feeds.map { ["feed": .int(Int64($0))] })]
  }

  /// The feed a "No such feed (…)" refusal names, if it names one.
  package static func feed(inRefusal reason: String) -> UInt64? {
    guard let open = reason.lastIndex(of: "("), let close = reason.lastIndex(of: ")"), open < close else { return nil }
    return UInt64(reason[reason.index(after: open)..<close])
  }

  /// The live sections of a subscription, from the `streams` summary Janus sends with each of
  /// its offers: every active audio or video stream whose feed belongs to a participant we know.
  /// Inactive streams (their publisher left) are not listed, nor the data channel.
  package static func sections(of summary: JSONValue?, participants: [UInt64: Peer]) -> [GroupStreamSection] {
    (summary?.arrayValue ?? []).compactMap { stream in
      guard stream["active"]?.boolValue != false, let mid = stream["mid"]?.stringValue,
        let kind = stream["type"]?.stringValue.flatMap(GroupMediaKind.init(rawValue:)),
        let feed = stream["feed_id"]?.integerValue, feed > 0, let from = participants[UInt64(feed)]
      else { return nil }
      return GroupStreamSection(mid: mid, kind: kind, from: from)
    }
  }
}
