/// One request on the engine thread, from queued to answered: where it waits, what came back,
/// and how many times a GOAWAY or a refusal sent it to another connection.
final class HTTP2Stream {
  typealias Completion = @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void

  let request: HTTP2Request
  let deadline: ContinuousClock.Instant
  private var completion: Completion?
  /// Connections that refused it so far (bounded by the engine).
  var attempts = 0
  var status = 0
  var headers: [String: String] = [:]
  var body: [UInt8] = []
  /// Set when the answer outgrew the bound: the stream is reset and fails.
  var bodyTooLarge = false

  init(request: HTTP2Request, completion: @escaping Completion) {
    self.request = request
    self.completion = completion
    deadline = .now + .milliseconds(Int64(max(0, request.timeoutSeconds) * 1000))
  }

  /// Forgets a partial answer before the request goes to another connection.
  func resetAnswer() {
    status = 0
    headers.removeAll()
    body.removeAll()
    bodyTooLarge = false
  }

  var response: HTTP2Response { HTTP2Response(status: status, headers: headers, body: body) }

  /// Calls the completion once (later calls do nothing).
  func finish(_ result: Result<HTTP2Response, HTTP2Error>) {
    let completion = self.completion
    self.completion = nil
    completion?(result)
  }
}
