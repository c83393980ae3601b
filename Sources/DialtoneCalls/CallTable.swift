import DialtoneProtocol

/// The router's calls by id, the live ones (ringing or connected) apart from the ended ones it
/// keeps for `endedRetention`. The relay looks a live call up for every candidate; in one table
/// with thousands of retained ended calls, each probe of that look-up compared the candidate's
/// call id with another call's (a heap object of its own, rarely in cache): a cache miss per
/// probe, `memcmp` stalled on its first load, ~1.5 % of the server's CPU under
/// `make bench-signaling`. Live calls alone make a small table that stays in cache. Which table
/// holds a call follows from its phase at each write, so reads see one table of calls as before.
package struct CallTable {
  private var live: [CallID: CallRouter.Call] = [:]
  private var ended: [CallID: CallRouter.Call] = [:]

  package init() {}

  package subscript(id: CallID) -> CallRouter.Call? {
    get { live[id] ?? ended[id] }
    set {
      guard let call = newValue else {
        removeValue(forKey: id)
        return
      }
      if call.isEnded {
        live.removeValue(forKey: id)
        ended[id] = call
      } else if live.updateValue(call, forKey: id) == nil {
        // New here as a live call: no ended one may keep the id (a rewrite of a live call, the
        // usual write, skips this look-up in the larger table).
        ended.removeValue(forKey: id)
      }
    }
  }

  /// Whether a call, live or ended, has this id (without copying it out).
  package func contains(_ id: CallID) -> Bool {
    live.index(forKey: id) != nil || ended.index(forKey: id) != nil
  }

  @discardableResult
  package mutating func removeValue(forKey id: CallID) -> CallRouter.Call? {
    live.removeValue(forKey: id) ?? ended.removeValue(forKey: id)
  }

  /// The calls not ended, in no order.
  package var liveValues: Dictionary<CallID, CallRouter.Call>.Values { live.values }

  /// Every call's id, live and ended, in no order (tests).
  package var ids: [CallID] { Array(live.keys) + Array(ended.keys) }

  /// How many calls of each kind are held (tests).
  package var counts: (live: Int, ended: Int) { (live.count, ended.count) }

  /// Reads a live call in place: through the table's values' modify accessor, which yields the
  /// stored call's address (its getter would copy every field of the call, and the table's own
  /// modify accessor moves the call into a coroutine frame allocated per call). `body` must not
  /// change the call. Nil when no live call has the id.
  package mutating func readLive<R>(_ id: CallID, _ body: (inout CallRouter.Call) -> R) -> R? {
    guard let index = live.index(forKey: id) else { return nil }
    return body(&live.values[index])
  }
}
