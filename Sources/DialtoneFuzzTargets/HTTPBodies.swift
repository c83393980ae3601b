import DialtoneProtocol

extension FuzzTargets {
  /// HTTP bodies the server and the SDK read; the first byte picks the type.
  public static func httpBodies(_ data: UnsafePointer<UInt8>, _ size: Int) {
    guard size > 0 else { return }
    let body = UnsafeBufferPointer(start: data + 1, count: size - 1)
    switch data[0] % 6 {
    case 0:
      // What `POST /v1/devices` does with a body.
      if let registration = try? MessageCodec.decode(DeviceRegistration.self, from: body) {
        if (try? registration.validate()) != nil { _ = registration.normalized() }
      }
    case 1: _ = try? MessageCodec.decode(ErrorBody.self, from: body, options: .lenient)
    case 2: _ = try? MessageCodec.decode(MeResponse.self, from: body, options: .lenient)
    case 3: _ = try? MessageCodec.decode(IceServersResponse.self, from: body, options: .lenient)
    case 4: _ = try? MessageCodec.decode(CallHistoryResponse.self, from: body, options: .lenient)
    default: _ = try? MessageCodec.decode(DeviceListResponse.self, from: body, options: .lenient)
    }
    return
  }
}
