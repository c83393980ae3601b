import DialtoneStorage
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer
@testable import DialtoneStorage

/// Which store a contract test runs against.
enum StoreBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
  case sqlite, postgres
  var testDescription: String { rawValue }
}

/// Where one test's stores live (a temporary directory, or a fresh schema of the suite's scratch
/// PostgreSQL), opened as often as a test wants: a second open is a restarted server.
struct StoreRig: Sendable {
  let backend: StoreBackend
  /// The data directory or the database URL.
  let location: String

  init(_ backend: StoreBackend) throws {
    self.backend = backend
    switch backend {
    case .sqlite: location = NSTemporaryDirectory() + "dialtone-contract-\(UUID().uuidString)"
    case .postgres: location = try SharedPostgres.server().freshSchema()
    }
  }

  func store() async throws -> any ServerStore {
    switch backend {
    case .sqlite: try SQLiteStore.open(dataDirectory: location)
    case .postgres: try await PostgresStore.open(url: location)
    }
  }

  func liveCalls() async throws -> any LiveCallStore {
    switch backend {
    case .sqlite: try SQLiteLiveCallStore.open(dataDirectory: location)
    case .postgres: try await PostgresLiveCallStore.open(url: location)
    }
  }

  /// The SQLite files go; a schema stays until the suite's server is deleted.
  func remove() {
    if backend == .sqlite { try? FileManager.default.removeItem(atPath: location) }
  }
}
