#if os(iOS)
  import Foundation
  import Security

  /// A stable id for this app installation: the `device` claim of the app's tokens, the
  /// session's `deviceId` and the key of its push registration (protocol.md 16.6).
  ///
  /// It lives in the Keychain, readable after the first unlock since boot and never leaving the
  /// device (`kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`: a backup restored on another
  /// device makes a new installation there). A reinstall on the same device keeps it (Keychain
  /// items outlive the app), and its registration is replaced by the next one. Earlier versions
  /// kept it in user defaults: it is moved over on first read.
  public enum InstallationID {
    static let service = "dialtone"
    static let account = "installationId"
    /// Where earlier versions kept it.
    static let legacyDefaultsKey = "dialtone.installationId"

    /// The id, made and stored on first use. Throws rather than make a new one when the Keychain
    /// cannot be read yet: iOS may launch the app for a VoIP push before the first unlock after
    /// a reboot, and an id made then would disagree with the one the app's tokens carry.
    public static func current() throws(InstallationIDError) -> String {
      if let stored = try read() { return stored }
      // Not stored yet (the Keychain is readable: a locked one throws above).
      let id = UserDefaults.standard.string(forKey: legacyDefaultsKey) ?? UUID().uuidString
      try store(id)
      UserDefaults.standard.removeObject(forKey: legacyDefaultsKey)
      return id
    }

    private static var query: [String: Any] {
      [
        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
        kSecAttrAccount as String: account,
      ]
    }

    private static func read() throws(InstallationIDError) -> String? {
      var lookup = query
      lookup[kSecReturnData as String] = true
      lookup[kSecMatchLimit as String] = kSecMatchLimitOne
      var result: CFTypeRef?
      let status = SecItemCopyMatching(lookup as CFDictionary, &result)
      switch status {
      case errSecSuccess:
        guard let data = result as? Data, let id = String(data: data, encoding: .utf8), !id.isEmpty else {
          throw .keychain(errSecDecode)
        }
        return id
      case errSecItemNotFound:
        return nil
      case errSecInteractionNotAllowed:
        throw .unavailableBeforeFirstUnlock
      default:
        throw .keychain(status)
      }
    }

    private static func store(_ id: String) throws(InstallationIDError) {
      var item = query
      item[kSecValueData as String] = Data(id.utf8)
      item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
      let status = SecItemAdd(item as CFDictionary, nil)
      switch status {
      case errSecSuccess, errSecDuplicateItem:
        return  // a concurrent first read stored one: `current()` reads it next time
      case errSecInteractionNotAllowed:
        throw .unavailableBeforeFirstUnlock
      default:
        throw .keychain(status)
      }
    }
  }

  public enum InstallationIDError: Error, Sendable, Equatable {
    /// The device has not been unlocked since it started: the Keychain cannot be read yet.
    /// Report pushes with `PushesBeforeFirstUnlock` until it can.
    case unavailableBeforeFirstUnlock
    /// Another Keychain error (`OSStatus`).
    case keychain(Int32)
  }
#endif
