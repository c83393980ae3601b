import DialtoneProtocol
import Foundation

/// Writes gathered ICE candidates into an SDP (the non-trickle way: one description that
/// already carries every candidate, followed by `a=end-of-candidates`).
public enum SDPCandidates {
  public static func embedding(_ candidates: [IceCandidate], in sdp: String) -> String {
    let newline = sdp.contains("\r\n") ? "\r\n" : "\n"
    var lines = sdp.components(separatedBy: newline)
    let trailingEmpty = lines.last == ""
    if trailingEmpty { lines.removeLast() }
    // Where each m-section ends, and its mid.
    var sections: [(end: Int, mid: String?)] = []
    for (index, line) in lines.enumerated() {
      if line.hasPrefix("m=") {
        if !sections.isEmpty { sections[sections.count - 1].end = index }
        sections.append((end: lines.count, mid: nil))
      } else if line.hasPrefix("a=mid:"), !sections.isEmpty {
        sections[sections.count - 1].mid = String(line.dropFirst("a=mid:".count))
      }
    }
    guard !sections.isEmpty else { return sdp }
    var additions = [[String]](repeating: [], count: sections.count)
    for candidate in candidates where !candidate.candidate.isEmpty {
      let section =
        candidate.sdpMid.flatMap { mid in sections.firstIndex { $0.mid == mid } }
        ?? candidate.sdpMLineIndex.flatMap { $0 >= 0 && $0 < sections.count ? $0 : nil } ?? 0
      let line = candidate.candidate.hasPrefix("a=") ? candidate.candidate : "a=" + candidate.candidate
      additions[section].append(line)
    }
    // Bundled sections share the first one's transport: every section says gathering is over.
    for index in additions.indices { additions[index].append("a=end-of-candidates") }
    for index in sections.indices.reversed() {
      lines.insert(contentsOf: additions[index], at: sections[index].end)
    }
    return lines.joined(separator: newline) + (trailingEmpty ? newline : "")
  }
}
