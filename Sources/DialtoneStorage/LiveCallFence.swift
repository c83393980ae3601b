import DialtoneProtocol

/// Which epoch of a call's ownership this node holds (cluster mode): the journal writes each
/// call, 1:1 or group, fenced by it (`LiveCallStore.write(_:fencedBy:)`), so that a node that
/// stalled past its lease while another took its calls over cannot overwrite the new owner's
/// state when it wakes up.
package protocol LiveCallFence: Sendable {
  func epoch(of callId: CallID) -> Int64
}
