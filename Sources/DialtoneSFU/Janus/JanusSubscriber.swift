import DialtoneJSON
import DialtoneProtocol

/// The bookkeeping of one device's single subscriber connection (protocol.md 20.9), as a pure
/// value: which publishers' feeds it should carry, which it carries, which of its m-sections
/// (mids) carry whom, and the one change at a time that gets Janus there.
///
/// One change at a time (`Negotiation`): a request is out until Janus has answered it and, if
/// it made an offer, until the device's answer to that offer reached Janus. Publishers that come and go
/// meanwhile go to Janus together in the next request (`update`: the departures' sections out,
/// then the arrivals in, which may reuse those sections). Janus never offers on its own
/// (`autoupdate` off): a departure is always an explicit unsubscribe, so the server knows
/// every offer the device gets, and there is never a second one before the first is answered.
///
/// While nobody else publishes, the connection is made on the room's placeholder feed (Janus's
/// dummy publisher, which sends nothing), so its ICE and DTLS are done when the first real
/// publisher arrives, in one renegotiation. The placeholder's section stays, idle: a real feed
/// taking over its m-line left webrtcbin 1.22 without a transceiver for the new stream now and
/// then (`jitter_buffer_set_retransmission: code should not be reached`, and no audio).
package struct JanusSubscriber: Sendable, Equatable {
  package enum Request: Sendable, Equatable {
    /// Attach a handle and join the room as a subscriber of these feeds.
    case join([UInt64])
    /// Unsubscribe these sections (by mid) and subscribe these feeds: one renegotiation.
    case update(subscribe: [UInt64], unsubscribe: [String])
    /// New ICE credentials for the same connection (`configure` with `restart`): one offer.
    case restartIce
    /// A fresh connection for the device (its old one is gone): a new handle joins for these
    /// feeds, and the old handle is detached.
    case replace([UInt64])

    package var feeds: [UInt64] {
      switch self {
      case .join(let feeds), .update(let feeds, _), .replace(let feeds): return feeds
      case .restartIce: return []
      }
    }

    /// The restart the offer it leads to makes, if any (protocol.md 20.10).
    package var restart: GroupRestart? {
      switch self {
      case .join, .update: return nil
      case .restartIce: return .ice
      case .replace: return .connection
      }
    }
  }

  /// Where the connection's one change at a time is.
  package enum Negotiation: Sendable, Equatable {
    /// Nothing is asked of Janus: the next change may go.
    case idle
    /// This request is on its way to Janus.
    case requesting(Request)
    /// Janus made an offer: the device's answer is awaited before anything else is asked.
    case awaitingAnswer
  }

  /// The subscriber handle, once a `join` succeeded.
  package private(set) var handle: UInt64?
  /// The feeds the connection should carry: every other participant whose media is up.
  package private(set) var wanted: Set<UInt64> = []
  /// The feeds Janus subscribed the connection to.
  package private(set) var subscribed: Set<UInt64> = []
  /// The live sections of the connection, by feed, as Janus's latest offer listed them.
  package private(set) var mids: [UInt64: [String]] = [:]
  /// Sections of departed publishers, to unsubscribe in the next request.
  package private(set) var departing: Set<String> = []
  package private(set) var negotiation = Negotiation.idle
  /// A restart the device asked for (20.10), made at the connection's next turn.
  package private(set) var restartWanted: GroupRestart?
  /// The room's placeholder feed, if it has one.
  package let placeholder: UInt64?

  package init(placeholder: UInt64? = nil) {
    self.placeholder = placeholder
  }

  /// Makes the connection on the placeholder when nothing else is wanted yet. Returns the
  /// request to send now.
  package mutating func start() -> Request? {
    guard let placeholder, handle == nil, negotiation == .idle, wanted.isEmpty else { return nil }
    wanted.insert(placeholder)
    return next()
  }

  /// A publisher's media is up: the connection should carry it. Returns the request to send now.
  package mutating func want(_ feed: UInt64) -> Request? {
    wanted.insert(feed)
    return next()
  }

  /// A publisher left: its sections go (inactive) in the next request. Returns it, if it can go now.
  package mutating func publisherGone(_ feed: UInt64) -> Request? {
    wanted.remove(feed)
    forget(feed)
    return next()
  }

  private mutating func forget(_ feed: UInt64) {
    if subscribed.remove(feed) != nil { departing.formUnion(mids.removeValue(forKey: feed) ?? []) }
  }

  /// Janus took the request in flight (`handle`: the one a `join` made). `sections`: the
  /// connection's live sections by feed, from Janus's summary; `offered`: Janus made an offer
  /// (the device must answer it before the next request). Returns the next request.
  package mutating func completed(handle: UInt64? = nil, sections: [UInt64: [String]], offered: Bool) -> Request? {
    guard case .requesting(let request) = negotiation else { return nil }
    negotiation = .idle
    switch request {
    case .join:
      if let handle { self.handle = handle }
    case .update(_, let gone):
      departing.subtract(gone)
    case .restartIce:
      break
    case .replace:
      // A new subscription: only what it joined for.
      if let handle { self.handle = handle }
      subscribed = []
      departing = []
    }
    subscribed.formUnion(request.feeds)
    // (A departed feed Janus still lists is already among `departing`.) An ICE restart's reply
    // lists no sections: they are as they were.
    if request != .restartIce { mids = sections.filter { subscribed.contains($0.key) } }
    // A feed whose publisher left while the request was out: its sections go again.
    for feed in request.feeds where !wanted.contains(feed) { forget(feed) }
    if offered { negotiation = .awaitingAnswer }
    return next()
  }

  /// The device's answer to Janus's offer reached Janus. Returns the next request.
  package mutating func answered() -> Request? {
    guard negotiation == .awaitingAnswer else { return nil }
    negotiation = .idle
    return next()
  }

  /// The device's connection lost its path (20.10): `ice` asks Janus for new ICE credentials
  /// after any change under way; `connection` replaces the subscription by a new one on a fresh
  /// connection, and an offer still awaiting its answer is given up (the device's connection
  /// that would have answered it is gone). Returns the request to send now.
  package mutating func restart(_ kind: GroupRestart) -> Request? {
    guard handle != nil else { return nil }  // no connection yet: its first offer is on its way
    if restartWanted != .connection { restartWanted = kind }
    if kind == .connection, negotiation == .awaitingAnswer { negotiation = .idle }
    return next()
  }

  /// Janus refused the request because `feed` is no such feed (its publisher left, or its
  /// media is not up yet; nil when Janus did not say which): the rest is asked for again.
  package mutating func refused(feed: UInt64?) -> Request? {
    guard case .requesting(let request) = negotiation else { return nil }
    negotiation = .idle
    if let restart = request.restart, restartWanted == nil { restartWanted = restart }
    if let feed {
      wanted.remove(feed)
    } else {
      // Which one is unknown: drop the whole batch rather than ask again for ever.
      wanted.subtract(request.feeds)
    }
    return next()
  }

  private mutating func next() -> Request? {
    guard negotiation == .idle else { return nil }
    let missing = wanted.subtracting(subscribed).sorted()
    let request: Request
    if handle == nil {
      guard !missing.isEmpty else { return nil }
      request = .join(missing)
    } else if let restart = restartWanted, restart == .ice || !wanted.isEmpty {
      restartWanted = nil
      request = restart == .ice ? .restartIce : .replace(wanted.sorted())
    } else {
      guard !missing.isEmpty || !departing.isEmpty else { return nil }
      request = .update(subscribe: missing, unsubscribe: departing.sorted())
    }
    negotiation = .requesting(request)
    return request
  }

  // MARK: - Janus's side

  /// VideoRoom's subscriber `join` of a call's room for `feeds`. `autoupdate` off: Janus does
  /// not offer a departure by itself (after a `kick` it would not anyway: the publisher has
  /// left the room by the time its media is hung up).
  package static func joinRequest(room: UInt64, pin: String, feeds: [UInt64]) -> JSONValue {
    [
      "request": "join", "ptype": "subscriber", "room": .int(Int64(room)), "pin": .string(pin),
      "streams": .array(feeds.map { ["feed": .int(Int64($0))] }), "autoupdate": false,
    ]
  }

  /// VideoRoom's `update`: sections out (by the subscription's own mid, which always counts as
  /// a change, even when the publisher's media is gone already), feeds in; one new offer.
  package static func updateRequest(subscribe feeds: [UInt64], unsubscribe mids: [String]) -> JSONValue {
    var request: [String: JSONValue] = ["request": "update"]
    if !feeds.isEmpty { request["subscribe"] = .array(feeds.map { ["feed": .int(Int64($0))] }) }
    if !mids.isEmpty { request["unsubscribe"] = .array(mids.map { ["sub_mid": .string($0)] }) }
    return .object(request)
  }

  /// VideoRoom's `configure` of a subscriber with `restart`: Janus offers new ICE credentials.
  package static let restartRequest: JSONValue = ["request": "configure", "restart": true]

  /// The room's placeholder feed, from a `listparticipants` answer: its dummy publisher.
  package static func placeholder(in listing: JSONValue?) -> UInt64? {
    let dummy = listing?["participants"]?.arrayValue?.first { $0["dummy"]?.boolValue == true }
    guard let id = dummy?["id"]?.integerValue, id > 0 else { return nil }
    return UInt64(id)
  }

  /// The feed a "No such feed (…)" refusal names, if it names one.
  package static func feed(inRefusal reason: String) -> UInt64? {
    guard let open = reason.lastIndex(of: "("), let close = reason.lastIndex(of: ")"), open < close else { return nil }
    return UInt64(reason[reason.index(after: open)..<close])
  }

  /// The live sections of a subscription by feed, from Janus's `streams` summary.
  package static func mids(of summary: JSONValue?) -> [UInt64: [String]] {
    var result: [UInt64: [String]] = [:]
    for stream in summary?.arrayValue ?? [] {
      guard stream["active"]?.boolValue != false, stream["type"]?.stringValue != "data",
        let mid = stream["mid"]?.stringValue, let feed = stream["feed_id"]?.integerValue, feed > 0
      else { continue }
      result[UInt64(feed), default: []].append(mid)
    }
    return result
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
