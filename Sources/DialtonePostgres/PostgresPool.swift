/// A bounded set of connections shared by tasks. At most `maxConnections` exist at once (counting
/// those being opened); at most `maxWaiters` tasks queue for one, and a checkout beyond that fails
/// at once with `poolExhausted` so that overload turns into errors, not an unbounded queue.
/// A connection that died or comes back inside a transaction is closed and its slot reused.
public actor PostgresPool {
  public struct Statistics: Sendable, Equatable {
    /// Connections that exist or are being opened.
    public var open = 0
    public var idle = 0
    public var waiting = 0
    /// The most connections that ever existed at once.
    public var peakOpen = 0
    /// Connections opened, and closed because they were broken, over the pool's life.
    public var opened = 0
    public var discarded = 0
  }

  public let configuration: PostgresConfiguration
  public let maxConnections: Int
  public let maxWaiters: Int

  /// What a waiter is handed: a connection, or a slot it must open a connection in (nil).
  private typealias Lease = Result<PostgresConnection?, PostgresError>

  private var idle: [PostgresConnection] = []
  private var waiters: [(id: Int, continuation: CheckedContinuation<Lease, Never>)] = []
  private var nextWaiterID = 0
  private var closed = false
  private var counts = Statistics()

  public init(_ configuration: PostgresConfiguration, maxConnections: Int, maxWaiters: Int) {
    precondition(maxConnections > 0 && maxWaiters >= 0, "a pool needs a connection and a non-negative queue")
    self.configuration = configuration
    self.maxConnections = maxConnections
    self.maxWaiters = maxWaiters
  }

  public var statistics: Statistics {
    var snapshot = counts
    snapshot.idle = idle.count
    snapshot.waiting = waiters.count
    return snapshot
  }

  /// Runs `body` with a connection of the pool, given back afterwards even if `body` throws.
  /// `body` runs in the caller's isolation, not on the pool.
  public func withConnection<T>(
    isolation: isolated (any Actor)? = #isolation, _ body: (PostgresConnection) async throws -> T
  ) async throws -> T {
    let connection = try await checkout()
    do {
      let result = try await body(connection)
      await checkin(connection)
      return result
    } catch {
      await checkin(connection)
      throw error
    }
  }

  /// A connection for the caller alone, until it gives it back with `checkin`.
  public func checkout() async throws(PostgresError) -> PostgresConnection {
    guard !closed else { throw .poolClosed }
    while let connection = idle.popLast() {
      if connection.isAlive { return connection }
      discard(connection)
    }
    if counts.open < maxConnections {
      counts.open += 1
      return try await openConnection()
    }
    guard waiters.count < maxWaiters else { throw .poolExhausted(maxWaiters: maxWaiters) }
    switch await waitForLease() {
    case .success(let connection?): return connection
    case .success(nil): return try await openConnection()
    case .failure(let error): throw error
    }
  }

  /// Gives a connection back: to the longest waiter, to the idle list, or closed if it is broken.
  public func checkin(_ connection: PostgresConnection) {
    guard !closed, connection.isReusable else {
      if !closed { counts.discarded += 1 }
      connection.close()
      releaseSlot()
      return
    }
    if waiters.isEmpty {
      idle.append(connection)
    } else {
      waiters.removeFirst().continuation.resume(returning: .success(connection))
    }
  }

  /// Closes the idle connections and fails every waiter; connections in use close when given back.
  public func close() {
    closed = true
    for connection in idle { connection.close() }
    counts.open -= idle.count
    idle.removeAll()
    let failed = waiters
    waiters.removeAll()
    for waiter in failed { waiter.continuation.resume(returning: .failure(.poolClosed)) }
  }

  /// Opens a connection in a slot already counted in `open`, off the actor: connecting blocks
  /// for up to the connect timeout, and the pool must keep serving check-ins meanwhile.
  private func openConnection() async throws(PostgresError) -> PostgresConnection {
    do {
      let connection = try await Self.connect(configuration)
      counts.opened += 1
      counts.peakOpen = max(counts.peakOpen, counts.open)
      return connection
    } catch {
      releaseSlot()
      throw error
    }
  }

  private nonisolated static func connect(_ configuration: PostgresConfiguration) async throws(PostgresError)
    -> PostgresConnection
  {
    try PostgresConnection(configuration)
  }

  private func discard(_ connection: PostgresConnection) {
    counts.discarded += 1
    connection.close()
    counts.open -= 1
  }

  /// A slot freed up: the longest waiter opens a connection in it, or it is gone.
  private func releaseSlot() {
    if waiters.isEmpty || closed {
      counts.open -= 1
    } else {
      waiters.removeFirst().continuation.resume(returning: .success(nil))
    }
  }

  private func waitForLease() async -> Lease {
    let id = nextWaiterID
    nextWaiterID += 1
    return await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        if Task.isCancelled {
          continuation.resume(returning: .failure(.cancelled))
        } else {
          waiters.append((id, continuation))
        }
      }
    } onCancel: {
      Task { await self.cancelWaiter(id) }
    }
  }

  private func cancelWaiter(_ id: Int) {
    guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
    waiters.remove(at: index).continuation.resume(returning: .failure(.cancelled))
  }
}
