import DialtoneClient
import DialtoneCommandLine
import DialtoneGStreamer
import Foundation

/// `--audio-profile KEY=VALUE,...`: Dialtone's audio settings changed one by one, to measure
/// what each is worth (`make bench-quality`); the defaults are `AudioProfile.standard`.
///
/// fec=0|1, dtx=0|1, red=0|1, red-distance=1|2|3, ptime=10|20|40|60, bitrate=6000..510000,
/// jitter-buffer=adaptive|<ms> (a fixed latency instead of the adaptive one).
enum AudioProfileOption {
  static let keys = "fec, dtx, red, red-distance, ptime, bitrate, jitter-buffer"

  static func apply(_ text: String, to media: inout GStreamerMedia) throws {
    for pair in text.split(separator: ",") {
      let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
      guard parts.count == 2 else { throw bad("\"\(pair)\" is not KEY=VALUE") }
      let (key, value) = (parts[0], parts[1])
      switch key {
      case "fec": media.audioProfile.inbandFEC = try flag(key, value)
      case "dtx": media.audioProfile.dtx = try flag(key, value)
      case "red": media.audioProfile.redundancy = try flag(key, value)
      case "red-distance":
        guard let n = Int(value), (1...3).contains(n) else { throw bad("red-distance expects 1, 2 or 3") }
        media.audioProfile.redundancyDistance = n
      case "ptime":
        guard let n = Int(value), AudioProfile.packetTimes.contains(n) else {
          throw bad("ptime expects one of \(AudioProfile.packetTimes.map(String.init).joined(separator: ", "))")
        }
        media.audioProfile.packetTimeMs = n
      case "bitrate":
        guard let n = Int(value), AudioProfile.bitrates.contains(n) else { throw bad("bitrate expects 6000...510000") }
        media.audioProfile.maxAverageBitrate = n
      case "jitter-buffer":
        if value == "adaptive" {
          media.fixedJitterBufferMs = nil
        } else if let n = Int(value), (0...1000).contains(n) {
          media.fixedJitterBufferMs = n
        } else {
          throw bad("jitter-buffer expects adaptive or a latency in ms (0...1000)")
        }
      default:
        throw bad("unknown key \"\(key)\" (known: \(keys))")
      }
    }
  }

  private static func flag(_ key: String, _ value: String) throws -> Bool {
    switch value {
    case "1", "on", "true": return true
    case "0", "off", "false": return false
    default: throw bad("\(key) expects 0 or 1")
    }
  }

  private static func bad(_ message: String) -> ArgumentError { ArgumentError(message: "--audio-profile: \(message)") }
}
