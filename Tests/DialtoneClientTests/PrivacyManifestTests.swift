import Foundation
import Testing

/// Apple requires an app to say why it uses certain APIs ("required reason" APIs), and every SDK
/// it links to say so in a privacy manifest. Each `Apple/Sources` target that uses one declares
/// it in its own `PrivacyInfo.xcprivacy`, and declares none it does not use; the portable core
/// (compiled into the app too) uses none.
@Suite struct PrivacyManifestTests {
  /// The required-reason API categories, and how their APIs are spelt in Swift source.
  static let categories: [String: [String]] = [
    "NSPrivacyAccessedAPICategoryUserDefaults": ["UserDefaults"],
    "NSPrivacyAccessedAPICategoryFileTimestamp": [
      ".creationDate", ".modificationDate", "CreationDateKey", "ModificationDateKey", "getattrlist", " stat(",
      "fstat(", "lstat(", "fstatat(",
    ],
    "NSPrivacyAccessedAPICategorySystemBootTime": ["systemUptime", "mach_absolute_time"],
    "NSPrivacyAccessedAPICategoryDiskSpace": [
      "volumeAvailableCapacity", "systemFreeSize", "NSFileSystemFreeSize", "statfs(", "statvfs(",
    ],
    "NSPrivacyAccessedAPICategoryActiveKeyboards": ["activeInputModes"],
  ]

  static var root: URL {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
  }

  /// The categories a folder's Swift sources use (comments aside).
  static func used(in folder: URL) throws -> Set<String> {
    var found: Set<String> = []
    let files = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil)
    while let file = files?.nextObject() as? URL {
      guard file.pathExtension == "swift" else { continue }
      let code = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
        .filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }.joined(separator: "\n")
      for (category, spellings) in categories where spellings.contains(where: code.contains) {
        found.insert(category)
      }
    }
    return found
  }

  /// The categories a privacy manifest declares, with their reasons.
  static func declared(in manifest: URL) throws -> [String: [String]] {
    let data = try Data(contentsOf: manifest)
    let plist = try #require(try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any])
    #expect(plist["NSPrivacyTracking"] as? Bool == false)
    let types = try #require(plist["NSPrivacyAccessedAPITypes"] as? [[String: Any]])
    var declared: [String: [String]] = [:]
    for entry in types {
      let category = try #require(entry["NSPrivacyAccessedAPIType"] as? String)
      declared[category] = entry["NSPrivacyAccessedAPITypeReasons"] as? [String] ?? []
    }
    return declared
  }

  @Test func everyAppleTargetDeclaresTheRequiredReasonAPIsItUses() throws {
    let apple = Self.root.appendingPathComponent("Apple/Sources")
    for target in try FileManager.default.contentsOfDirectory(atPath: apple.path).sorted() {
      let folder = apple.appendingPathComponent(target)
      let used = try Self.used(in: folder)
      let manifest = folder.appendingPathComponent("PrivacyInfo.xcprivacy")
      guard FileManager.default.fileExists(atPath: manifest.path) else {
        #expect(used.isEmpty, "\(target) uses \(used.sorted()) but has no PrivacyInfo.xcprivacy")
        continue
      }
      let declared = try Self.declared(in: manifest)
      #expect(Set(declared.keys) == used, "\(target): declared \(declared.keys.sorted()), used \(used.sorted())")
      for (category, reasons) in declared { #expect(!reasons.isEmpty, "\(target): no reason for \(category)") }
    }
  }

  @Test func thePortableCoreUsesNoRequiredReasonAPI() throws {
    for target in PortableSourcesTests.portableTargets {
      let used = try Self.used(in: Self.root.appendingPathComponent("Sources/\(target)"))
      #expect(used.isEmpty, "\(target) uses \(used.sorted()): give it a privacy manifest, or move the use to Apple/")
    }
  }
}
