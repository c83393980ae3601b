#if os(iOS)
  import CallKit
  import DialtoneClient
  import Foundation

  /// The principal class of a Call Directory extension. Subclass it, override
  /// `appGroupIdentifier`, and name the subclass in the extension's Info.plist
  /// (`NSExtensionPrincipalClass`). What to add and remove is `DirectoryExtensionLoad`'s
  /// (DialtoneClient, tested on Linux); this class only hands it to the system.
  open class DialtoneCallDirectoryHandler: CXCallDirectoryProvider, CXCallDirectoryExtensionContextDelegate {
    /// The app group the app and this extension share (their
    /// `com.apple.security.application-groups` entitlement), e.g. `group.com.example.phone`.
    open var appGroupIdentifier: String { "" }

    /// Where the app's `CallDirectoryFile` and this extension's marker are: the app group's
    /// container. The app's `DirectorySync` must use the same one.
    open func makeStore() throws -> any CallDirectoryStore {
      guard !appGroupIdentifier.isEmpty, let store = DirectoryFileStore(appGroup: appGroupIdentifier) else {
        throw DialtoneCallDirectoryError.noAppGroup(appGroupIdentifier)
      }
      return store
    }

    open override func beginRequest(with context: CXCallDirectoryExtensionContext) {
      context.delegate = self
      // Asked before any entry is added or removed, as CallKit requires.
      let isIncremental = context.isIncremental
      let store: any CallDirectoryStore
      let load: DirectoryExtensionLoad
      do {
        store = try makeStore()
        load = try DirectoryExtensionLoad.plan(
          file: try store.read(CallDirectoryFile.fileName),
          marker: try? store.read(CallDirectoryLoadedMarker.fileName), isIncremental: isIncremental)
      } catch {
        // The system keeps what it has (a complete request that adds nothing would empty it);
        // the app writes a good file and reloads.
        context.cancelRequest(withError: error)
        return
      }
      if load.removeAll {
        context.removeAllIdentificationEntries()
        context.removeAllBlockingEntries()
      }
      for number in load.removeIdentification { context.removeIdentificationEntry(withPhoneNumber: number) }
      for number in load.removeBlocking { context.removeBlockingEntry(withPhoneNumber: number) }
      for entry in load.addIdentification {
        context.addIdentificationEntry(withNextSequentialPhoneNumber: entry.number, label: entry.label)
      }
      for number in load.addBlocking { context.addBlockingEntry(withNextSequentialPhoneNumber: number) }
      let marker = load.markerAfterCompletion
      context.completeRequest { expired in
        // Recorded only once the system has the entries: an expired request added nothing.
        guard !expired, let marker, let data = try? marker.encoded() else { return }
        try? store.write(data, to: CallDirectoryLoadedMarker.fileName)
      }
    }

    /// The system refused the entries (out of order, a duplicate, too many): the marker is not
    /// written, so the next request loads in full or from what the system had.
    open func requestFailed(for extensionContext: CXCallDirectoryExtensionContext, withError error: any Error) {
      NSLog("dialtone: the call directory request failed: %@", String(describing: error))
    }
  }

  public enum DialtoneCallDirectoryError: Error, LocalizedError {
    /// No container for this app group (the entitlement is missing, or the identifier is wrong).
    case noAppGroup(String)

    public var errorDescription: String? {
      switch self {
      case .noAppGroup(let identifier): return "no app group container for \"\(identifier)\""
      }
    }
  }
#endif
