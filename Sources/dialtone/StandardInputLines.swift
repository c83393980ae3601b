import DialtoneSupport
import Foundation

/// Lines typed on standard input, read on a thread of their own (reading blocks).
enum StandardInputLines {
  static func stream() -> AsyncStream<String> {
    let (stream, sink) = AsyncStream<String>.makeStream(bufferingPolicy: .unbounded)
    _ = WorkerThread(name: "stdin") {
      while let line = readLine(strippingNewline: true) { sink.yield(line) }
      sink.finish()
    }
    return stream
  }
}
