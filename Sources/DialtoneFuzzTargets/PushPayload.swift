import DialtoneProtocol
import Foundation

extension FuzzTargets {
  /// Push payloads as the SDK gets them: JSON bytes (FCM data), and the dictionary PushKit hands
  /// over, built here from the same bytes.
  public static func pushPayload(_ data: UnsafePointer<UInt8>, _ size: Int) {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    _ = try? IncomingCallPush(jsonBytes: bytes, options: .lenient)
    _ = try? MissedCallPush(jsonBytes: bytes, options: .lenient)
    if let dictionary = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] {
      _ = try? IncomingCallPush(payload: dictionary)
      _ = try? MissedCallPush(payload: dictionary)
    }
    return
  }
}
