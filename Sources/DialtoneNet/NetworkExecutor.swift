import DialtoneSupport
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A serial executor that runs jobs on the network thread, so an actor that handles socket
/// events can take them synchronously (`assumeIsolated`) instead of hopping threads twice per
/// message. Before the network loop exists, and after it stops, jobs run on a fallback serial
/// queue (never both at once), so awaiting the actor never hangs during startup or shutdown.
///
/// It is a task executor too: a task started with it as its preference
/// (`Task(executorPreference:)`) begins on the network thread, so work handed to the actor from
/// another thread costs one wake-up of the network thread, not a hop through the global pool
/// first.
public final class NetworkExecutor: SerialExecutor, TaskExecutor, Sendable {
  private struct State {
    weak var loop: ServiceLoop?
  }
  private let state = Locked(State())
  /// The thread running this executor's jobs right now (network thread or fallback queue), 0 for
  /// none. Atomic rather than under `state`'s lock: `isCurrent` is asked for every socket event.
  private let owner = Atomic<UInt>(0)
  private let fallback = DispatchQueue(label: "dialtone.network-executor.fallback")

  public init() {}

  public func enqueue(_ job: consuming ExecutorJob) {
    let unowned = UnownedJob(job)
    let target = state.withLock { $0.loop }
    if let target, target.post(.work(.job(unowned))) { return }
    runOnFallback(.job(unowned))
  }

  /// Runs `action` where this executor's jobs run, in order with them, as a job would, without
  /// a task: for work another thread hands to the network thread many times a second (the
  /// journal's commit reports), which a `Task` cost an allocation, its executor bookkeeping and
  /// an async frame for. On the network thread `isCurrent` holds while it runs.
  public func post(_ action: @escaping @Sendable () -> Void) {
    let target = state.withLock { $0.loop }
    if let target, target.post(.work(.action(action))) { return }
    runOnFallback(.action(action))
  }

  public func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }

  public func checkIsolated() {
    precondition(isCurrent, "not on the network executor")
  }

  /// True on the thread that currently runs this executor's jobs.
  public var isCurrent: Bool {
    // Only this thread ever stores its own id here, so a stale read can never equal it.
    let current = owner.load(ordering: .relaxed)
    return current != 0 && pthread_equal(current, pthread_self()) != 0
  }

  /// Runs `action` on the network thread after `delay`, from the loop's own timer (`LoopTimers`);
  /// nil unless called on the network thread while its loop runs: the caller then schedules it
  /// elsewhere (`NetworkLoopClock`).
  public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> (any ScheduledAction)? {
    guard let loop = state.withLock({ $0.loop }) else { return nil }
    return loop.schedule(after: delay, action)
  }

  /// Timers waiting in the loop's heap (tests; on the network thread), nil without a loop.
  var pendingLoopTimers: Int? { state.withLock { $0.loop }?.timers.pendingCount }

  /// How many times the loop's timer descriptor and its coalescing timer expired (tests; on the
  /// network thread), nil without a loop.
  var loopTimerExpiries: (timers: Int, coalescing: Int)? {
    guard let loop = state.withLock({ $0.loop }) else { return nil }
    return (loop.timers.expiries, (loop.role as? ServerRole)?.coalescingTimerExpiries ?? 0)
  }

  func attach(_ loop: ServiceLoop) {
    fallback.sync {}  // nothing may still run on the fallback queue once the loop owns the jobs
    state.withLock { $0.loop = loop }
  }

  /// Called on the network thread when it starts and stops owning the jobs.
  func networkThreadStarted() { owner.store(pthread_self(), ordering: .relaxed) }
  func networkThreadStopped(leftover: [ExecutorWork]) {
    owner.store(0, ordering: .relaxed)
    state.withLock { $0.loop = nil }
    for work in leftover { runOnFallback(work) }
  }

  func run(_ work: ExecutorWork) {
    switch work {
    case .job(let job):
      job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
    case .action(let action):
      action()
    }
  }

  private func runOnFallback(_ work: ExecutorWork) {
    fallback.async { [self] in
      owner.store(pthread_self(), ordering: .relaxed)
      run(work)
      owner.store(0, ordering: .relaxed)
    }
  }
}

/// What runs on a `NetworkExecutor`: a task's job, or a plain action (`post`).
enum ExecutorWork: Sendable {
  case job(UnownedJob)
  case action(@Sendable () -> Void)
}
