import CNGHTTP2

/// What an HTTP/2 session reports while it reads frames (on the thread that feeds it).
protocol NGHTTP2SessionDelegate: AnyObject {
  func responseHeader(stream: Int32, name: String, value: String)
  func responseData(stream: Int32, bytes: UnsafeRawBufferPointer)
  /// The stream is over: `errorCode` 0 when it ended normally, else its RST_STREAM code
  /// (REFUSED_STREAM, 7, also for streams a GOAWAY did not take).
  func streamClosed(stream: Int32, errorCode: UInt32)
  func goAway(lastStreamID: Int32, errorCode: UInt32)
  /// The server's SETTINGS (not an acknowledgement) arrived: its limits are known.
  func settingsReceived()
  /// The server acknowledged a PING this client sent: the connection is alive both ways.
  func pingAcknowledged()
}

/// nghttp2's client session behind a pointer-free API, driven without its I/O callbacks: bytes
/// read are fed in (`receive`), and everything pending is serialized out in one buffer
/// (`serialize`) so that the connection writes it with as few calls as possible.
final class NGHTTP2Session {
  static let refusedStream: UInt32 = NGHTTP2_REFUSED_STREAM.rawValue
  private let session: OpaquePointer
  private unowned let delegate: any NGHTTP2SessionDelegate
  /// Request bodies not yet serialized, by stream.
  private var bodies: [Int32: (bytes: [UInt8], offset: Int)] = [:]

  init(delegate: any NGHTTP2SessionDelegate) throws(HTTP2Error) {
    self.delegate = delegate
    var callbacks: OpaquePointer?
    guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else {
      throw HTTP2Error("nghttp2: out of memory")
    }
    defer { nghttp2_session_callbacks_del(callbacks) }
    nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk)
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrame)
    var session: OpaquePointer?
    // The delegate pointer is filled in below, once `self` exists: nghttp2 calls nothing before.
    guard nghttp2_session_client_new(&session, callbacks, nil) == 0, let session else {
      throw HTTP2Error("nghttp2: cannot create a session")
    }
    self.session = session
    nghttp2_session_set_user_data(session, Unmanaged.passUnretained(self).toOpaque())
    // A provider API client never takes server pushes.
    var settings = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0)]
    _ = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
  }

  deinit { nghttp2_session_del(session) }

  /// How many streams the server lets this client have open at once (100 until its SETTINGS).
  var remoteMaxConcurrentStreams: Int {
    Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
  }

  /// Queues a request; its frames go out with the next `serialize`. Returns the stream id.
  func submitRequest(headers: [(name: String, value: String)], body: [UInt8]) throws(HTTP2Error) -> Int32 {
    // One buffer for every name and value (nghttp2 copies them before returning).
    var storage: [UInt8] = []
    var spans: [(name: Range<Int>, value: Range<Int>)] = []
    spans.reserveCapacity(headers.count)
    for header in headers {
      let nameStart = storage.count
      storage.append(contentsOf: header.name.utf8)
      let valueStart = storage.count
      storage.append(contentsOf: header.value.utf8)
      spans.append((nameStart..<valueStart, valueStart..<storage.count))
    }
    storage.append(0)  // never an empty buffer, so the base address exists
    let streamID = storage.withUnsafeMutableBufferPointer { raw -> Int32 in
      guard let base = raw.baseAddress else { return -1 }
      var fields = spans.map {
        nghttp2_nv(
          name: base + $0.name.lowerBound, value: base + $0.value.lowerBound, namelen: $0.name.count,
          valuelen: $0.value.count, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
      }
      guard !body.isEmpty else {
        return nghttp2_submit_request(session, nil, &fields, fields.count, nil, nil)
      }
      var provider = nghttp2_data_provider(
        source: nghttp2_data_source(ptr: nil), read_callback: readBody)
      return nghttp2_submit_request(session, nil, &fields, fields.count, &provider, nil)
    }
    guard streamID > 0 else {
      throw HTTP2Error("cannot open a stream: \(String(cString: nghttp2_strerror(streamID)))")
    }
    if !body.isEmpty { bodies[streamID] = (body, 0) }
    return streamID
  }

  /// Queues a PING (RFC 9113 §6.7); the server's acknowledgement reaches `pingAcknowledged`.
  func submitPing() throws(HTTP2Error) {
    let result = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
    guard result == 0 else { throw HTTP2Error("cannot send a PING: \(String(cString: nghttp2_strerror(result)))") }
  }

  /// Resets a stream this client gives up on (timed out, answer too large).
  func cancel(stream: Int32) {
    _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, NGHTTP2_CANCEL.rawValue)
  }

  /// Processes bytes read from the connection; the delegate hears of what they carried.
  func receive(_ buffer: [UInt8], count: Int) throws(HTTP2Error) {
    let result = buffer.withUnsafeBytes { raw in
      nghttp2_session_mem_recv(session, raw.bindMemory(to: UInt8.self).baseAddress, count)
    }
    guard result >= 0 else {
      throw HTTP2Error("HTTP/2 protocol error: \(String(cString: nghttp2_strerror(Int32(clamping: result))))")
    }
  }

  /// Appends every frame waiting to be sent to `output`.
  func serialize(into output: inout [UInt8]) throws(HTTP2Error) {
    while true {
      var data: UnsafePointer<UInt8>?
      let count = nghttp2_session_mem_send(session, &data)
      guard count >= 0 else {
        throw HTTP2Error("HTTP/2: cannot send: \(String(cString: nghttp2_strerror(Int32(clamping: count))))")
      }
      guard count > 0, let data else { return }
      output.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
    }
  }

  /// False once the session has nothing more to do (after a GOAWAY both ways, or a fatal error).
  var isAlive: Bool { nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0 }

  // MARK: - From the C callbacks

  fileprivate func copyBody(stream: Int32, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, end: Bool) {
    guard let (bytes, offset) = bodies[stream] else { return (0, true) }
    let count = min(buffer.count, bytes.count - offset)
    bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<offset + count])) }
    if offset + count == bytes.count {
      bodies.removeValue(forKey: stream)
      return (count, true)
    }
    bodies[stream] = (bytes, offset + count)
    return (count, false)
  }

  fileprivate func header(stream: Int32, name: String, value: String) {
    delegate.responseHeader(stream: stream, name: name, value: value)
  }

  fileprivate func data(stream: Int32, bytes: UnsafeRawBufferPointer) {
    delegate.responseData(stream: stream, bytes: bytes)
  }

  fileprivate func closed(stream: Int32, errorCode: UInt32) {
    bodies.removeValue(forKey: stream)
    delegate.streamClosed(stream: stream, errorCode: errorCode)
  }

  fileprivate func goAway(lastStreamID: Int32, errorCode: UInt32) {
    delegate.goAway(lastStreamID: lastStreamID, errorCode: errorCode)
  }

  fileprivate func settings() { delegate.settingsReceived() }

  fileprivate func pingAcknowledged() { delegate.pingAcknowledged() }
}

private func owner(_ user: UnsafeMutableRawPointer?) -> NGHTTP2Session? {
  user.map { Unmanaged<NGHTTP2Session>.fromOpaque($0).takeUnretainedValue() }
}

private let readBody: nghttp2_data_source_read_callback = { _, stream, buffer, length, flags, _, user in
  guard let session = owner(user), let buffer else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
  let (count, end) = session.copyBody(stream: stream, into: UnsafeMutableRawBufferPointer(start: buffer, count: length))
  if end { flags?.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue) }
  return count
}

private let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, user in
  guard let session = owner(user), let frame, let name, let value,
    frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue)
  else { return 0 }
  session.header(
    stream: frame.pointee.hd.stream_id,
    name: String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self),
    value: String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self))
  return 0
}

private let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, stream, data, length, user in
  guard let session = owner(user), let data else { return 0 }
  session.data(stream: stream, bytes: UnsafeRawBufferPointer(start: data, count: length))
  return 0
}

private let onStreamClose: nghttp2_on_stream_close_callback = { _, stream, errorCode, user in
  owner(user)?.closed(stream: stream, errorCode: errorCode)
  return 0
}

private let onFrame: nghttp2_on_frame_recv_callback = { _, frame, user in
  guard let session = owner(user), let frame else { return 0 }
  switch frame.pointee.hd.type {
  case UInt8(NGHTTP2_GOAWAY.rawValue):
    session.goAway(lastStreamID: frame.pointee.goaway.last_stream_id, errorCode: frame.pointee.goaway.error_code)
  case UInt8(NGHTTP2_SETTINGS.rawValue) where frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0:
    session.settings()
  case UInt8(NGHTTP2_PING.rawValue) where frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0:
    session.pingAcknowledged()
  default: break
  }
  return 0
}
