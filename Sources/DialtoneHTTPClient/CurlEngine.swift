import CCurl
import DialtoneSupport
import Foundation

/// Owns the curl multi handle and the only thread that touches it. Other threads queue
/// transfers and wake it with `curl_multi_wakeup`.
final class CurlEngine: @unchecked Sendable {
  // @unchecked: `multi`, `active` and `transfers` are confined to the engine thread.
  /// Transfers queued by other threads, and whether the engine stopped.
  private let inbox = Locked<(pending: [Transfer], stopped: Bool)>(([], false))
  private let multi: UnsafeMutableRawPointer
  private var active: Set<ObjectIdentifier> = []
  private var transfers: [ObjectIdentifier: Transfer] = [:]
  private let configuration: HTTPClient.Configuration

  private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

  init(configuration: HTTPClient.Configuration) {
    _ = Self.globalInit
    self.configuration = configuration
    guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
    self.multi = multi
    _ = dt_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
    _ = dt_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maxConnectionsPerHost)
    _ = dt_curl_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, 1000)
    _ = WorkerThread(name: "dialtone-http-client") { [self] in run() }
  }

  func submit(
    _ request: HTTPClientRequest, completion: @escaping @Sendable (Result<HTTPClientResponse, HTTPClientError>) -> Void
  ) {
    let transfer = Transfer(request: request, completion: completion)
    let accepted = inbox.withLock { inbox -> Bool in
      guard !inbox.stopped else { return false }
      inbox.pending.append(transfer)
      return true
    }
    guard accepted else { return completion(.failure(HTTPClientError("the HTTP client is shut down"))) }
    curl_multi_wakeup(multi)
  }

  func stop() {
    inbox.withLock { $0.stopped = true }
    curl_multi_wakeup(multi)
  }

  private func run() {
    var running: Int32 = 0
    while true {
      let (batch, stopping) = inbox.withLock { inbox -> ([Transfer], Bool) in
        defer { inbox.pending.removeAll() }
        return (inbox.pending, inbox.stopped)
      }
      if stopping {
        for transfer in batch { transfer.finish(.failure(HTTPClientError("the HTTP client is shut down"))) }
        for transfer in transfers.values {
          curl_multi_remove_handle(multi, transfer.easy)
          transfer.finish(.failure(HTTPClientError("the HTTP client is shut down")))
        }
        transfers.removeAll()
        curl_multi_cleanup(multi)
        return
      }
      for transfer in batch {
        guard transfer.configure(configuration) else {
          transfer.finish(.failure(HTTPClientError("invalid request for \(transfer.request.url)")))
          continue
        }
        transfers[ObjectIdentifier(transfer)] = transfer
        curl_multi_add_handle(multi, transfer.easy)
      }
      curl_multi_perform(multi, &running)
      var queued: Int32 = 0
      while let message = curl_multi_info_read(multi, &queued) {
        guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
        let code = message.pointee.data.result
        var raw: UnsafeMutableRawPointer?
        _ = dt_curl_getinfo_ptr(easy, CURLINFO_PRIVATE, &raw)
        curl_multi_remove_handle(multi, easy)
        guard let raw else { continue }
        let transfer = Unmanaged<Transfer>.fromOpaque(raw).takeUnretainedValue()
        transfers.removeValue(forKey: ObjectIdentifier(transfer))
        if code == CURLE_OK {
          transfer.finish(.success(transfer.response()))
        } else {
          transfer.finish(.failure(HTTPClientError(String(cString: curl_easy_strerror(code)))))
        }
      }
      curl_multi_poll(multi, nil, 0, 1000, nil)
    }
  }
}
