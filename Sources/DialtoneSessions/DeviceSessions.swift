/// One user's sessions on this node, by device id.
///
/// Nearly every user has one device signed in, so that one is kept inline: finding a device's
/// session hashes only the user's id (in `SessionRegistry`) and compares the device's, where a
/// table per user hashed the device's id too (every relayed message looks its target up), and a
/// one-device user costs no table of its own. A second device turns it into a table; back to
/// one device, inline again.
package struct DeviceSessions: Sequence {
  private enum Storage {
    case none
    case one(deviceId: String, session: any DeliverySession)
    case many([String: any DeliverySession])
  }

  private var storage: Storage = .none

  package init() {}

  package var count: Int {
    switch storage {
    case .none: 0
    case .one: 1
    case .many(let table): table.count
    }
  }

  package var isEmpty: Bool { count == 0 }

  package subscript(deviceId: String) -> (any DeliverySession)? {
    switch storage {
    case .none: nil
    case .one(let id, let session): id == deviceId ? session : nil
    case .many(let table): table[deviceId]
    }
  }

  /// The device's session from now on (replacing the one it had).
  package mutating func set(_ session: any DeliverySession, for deviceId: String) {
    switch storage {
    case .none:
      storage = .one(deviceId: deviceId, session: session)
    case .one(let id, let kept):
      storage = id == deviceId ? .one(deviceId: deviceId, session: session) : .many([id: kept, deviceId: session])
    case .many(var table):
      storage = .none  // the table's one reference is the local one: changed in place
      table[deviceId] = session
      storage = .many(table)
    }
  }

  /// The device has no session here any more.
  package mutating func remove(_ deviceId: String) {
    switch storage {
    case .none:
      break
    case .one(let id, _):
      if id == deviceId { storage = .none }
    case .many(var table):
      storage = .none
      table.removeValue(forKey: deviceId)
      if table.count == 1, let last = table.first {
        storage = .one(deviceId: last.key, session: last.value)
      } else if !table.isEmpty {
        storage = .many(table)
      }
    }
  }

  package struct Iterator: IteratorProtocol {
    fileprivate var single: (deviceId: String, session: any DeliverySession)?
    fileprivate var table: Dictionary<String, any DeliverySession>.Iterator?

    package mutating func next() -> (deviceId: String, session: any DeliverySession)? {
      if let single {
        self.single = nil
        return single
      }
      return table?.next().map { ($0.key, $0.value) }
    }
  }

  package func makeIterator() -> Iterator {
    switch storage {
    case .none: Iterator(single: nil, table: nil)
    case .one(let id, let session): Iterator(single: (id, session), table: nil)
    case .many(let table): Iterator(single: nil, table: table.makeIterator())
    }
  }
}
