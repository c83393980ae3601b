import DialtoneProtocol

/// What a private pre-connect leg (relay only, protocol.md 11) may tell the caller of a local
/// candidate: a relay candidate, without its related address. A relay candidate's `raddr` and
/// `rport` (RFC 8839, section 5.1) name the address the TURN server saw the device at, its own
/// or its NAT's: libnice writes it there, libwebrtc clears it. Browsers send `0.0.0.0` and port
/// `0` in its place; so does this. Any other candidate type is dropped, whatever the engine
/// gathered: the rule does not depend on the engine honouring the relay policy.
public enum PrivateCandidates {
  /// The candidate as a private leg sends it, or nil when it must not be sent.
  public static func relayOnly(_ candidate: IceCandidate) -> IceCandidate? {
    let prefix = candidate.candidate.hasPrefix("a=") ? "a=" : ""
    var fields = candidate.candidate.dropFirst(prefix.count).split(separator: " ", omittingEmptySubsequences: true)
      .map(String.init)
    guard let typ = fields.firstIndex(of: "typ"), typ + 1 < fields.count, fields[typ + 1] == "relay" else {
      return nil
    }
    for (key, hidden) in [("raddr", "0.0.0.0"), ("rport", "0")] {
      // Extension attributes come in name-value pairs after the type.
      var index = typ + 2
      while index + 1 < fields.count {
        if fields[index] == key { fields[index + 1] = hidden }
        index += 2
      }
    }
    var sanitized = candidate
    sanitized.candidate = prefix + fields.joined(separator: " ")
    return sanitized
  }
}
