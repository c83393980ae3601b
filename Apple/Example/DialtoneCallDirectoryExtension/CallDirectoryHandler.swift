import DialtoneCallDirectory

/// The extension's principal class (Info.plist: `NSExtensionPrincipalClass` =
/// `$(PRODUCT_MODULE_NAME).CallDirectoryHandler`). Everything it does is
/// `DialtoneCallDirectoryHandler`'s; it only names the app group it shares with the app.
final class CallDirectoryHandler: DialtoneCallDirectoryHandler {
  /// The same group as the app's `DirectoryFileStore(appGroup:)`, in both targets' entitlements.
  override var appGroupIdentifier: String { "group.com.example.dialtone" }
}
