/// The CPU a process spent between two readings of its threads' run times (nanoseconds on a
/// CPU, per thread id, from /proc/PID/task/TID/schedstat). Summed per thread because the
/// process-wide figure in /proc/PID/stat comes in clock ticks (10 ms), as coarse as a tenth of
/// what a target spends in a one-second slice.
package enum ThreadTimes {
  /// A thread present only in `end` started in between and counts from zero; one present only
  /// in `start` ended in between, and what it ran after `start` is lost (a slice's worth of one
  /// thread at most). A thread's time never goes back; a smaller figure (its id reused) counts
  /// from zero.
  package static func elapsedNanos(from start: [Int32: UInt64], to end: [Int32: UInt64]) -> UInt64 {
    var total: UInt64 = 0
    for (thread, now) in end {
      let before = start[thread] ?? 0
      total += now >= before ? now - before : now
    }
    return total
  }
}
