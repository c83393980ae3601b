/// Phone numbers as the system's Call Directory takes them: the E.164 digits, country code
/// first, as one integer (`+1 415 555 0100` is 14155550100).
public enum PhoneNumber {
  /// E.164 allows at most 15 digits; the shortest numbers in service have 7 with their
  /// country code.
  public static let digits: ClosedRange<Int64> = 1_000_000...999_999_999_999_999

  /// The number of a `+`-prefixed E.164 string, which may group its digits with spaces,
  /// hyphens, dots or parentheses; nil for anything else (no `+`, a leading 0, letters, too
  /// few or too many digits).
  public static func parse(_ text: String) -> Int64? {
    var scalars = Substring(text).unicodeScalars.makeIterator()
    guard scalars.next() == "+" else { return nil }
    var value: Int64 = 0
    var count = 0
    while let scalar = scalars.next() {
      switch scalar {
      case "0"..."9":
        guard count < 15, !(count == 0 && scalar == "0") else { return nil }
        value = value * 10 + Int64(scalar.value - 48)
        count += 1
      case " ", "-", ".", "(", ")":
        continue
      default:
        return nil
      }
    }
    return digits.contains(value) ? value : nil
  }

  /// `+` and the digits: the canonical form a number is shown and uploaded in.
  public static func e164(_ number: Int64) -> String { "+\(number)" }
}

/// The bounds of one user's directory (docs/protocol.md §16.11).
public enum DirectoryLimits {
  public static let maxIdentificationEntries = 20_000
  public static let maxBlockedNumbers = 20_000
  public static let maxLabelBytes = 128
  /// Versions a device may lag behind and still get only the changes.
  public static let changeHistoryVersions: Int64 = 32
}

/// A number to label on the incoming-call screen.
public struct DirectoryIdentification: WireCodable, Hashable {
  public var number: Int64
  public var label: String

  public init(number: Int64, label: String) {
    self.number = number
    self.label = label
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(number: 0, label: "") }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("label", &label, WireText(maxBytes: DirectoryLimits.maxLabelBytes))
    try c.integer("number", &number, PhoneNumber.digits)
  }
}

/// `GET /v1/directory?since=VERSION`: the user's lists as of `version`, either whole (`full`)
/// or as the changes since the version the device has. Every list is in ascending number
/// order without repeats. In a change set, `identify` holds entries added or relabelled and
/// `removedIdentify` / `removedBlock` the numbers taken off; a full snapshot has no removals.
public struct DirectoryResponse: WireCodable, Hashable {
  public var version: Int64
  public var full: Bool
  public var identify: [DirectoryIdentification]
  public var block: [Int64]
  public var removedIdentify: [Int64]
  public var removedBlock: [Int64]

  public init(
    version: Int64, full: Bool, identify: [DirectoryIdentification] = [], block: [Int64] = [],
    removedIdentify: [Int64] = [], removedBlock: [Int64] = []
  ) {
    self.version = version
    self.full = full
    self.identify = identify
    self.block = block
    self.removedIdentify = removedIdentify
    self.removedBlock = removedBlock
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(version: 0, full: true) }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.integers("block", &block, PhoneNumber.digits)
    try c.bool("full", &full)
    try c.objects("identify", &identify)
    try c.integers("removedBlock", &removedBlock, PhoneNumber.digits)
    try c.integers("removedIdentify", &removedIdentify, PhoneNumber.digits)
    try c.integer("version", &version, 0...Int64.max)
  }
}

/// `PUT /v1/directory/{userId}` (the app's backend): the user's whole lists, numbers as
/// E.164 strings; they replace what the server had, and devices fetch only the difference.
public struct DirectoryUpload: WireCodable, Hashable {
  public struct Entry: WireCodable, Hashable {
    public var number: String
    public var label: String

    public init(number: String, label: String) {
      self.number = number
      self.label = label
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(number: "", label: "") }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("label", &label, .any)
      try c.string("number", &number, .any)
    }
  }

  public var identify: [Entry]
  public var block: [String]

  public init(identify: [Entry] = [], block: [String] = []) {
    self.identify = identify
    self.block = block
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init() }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.strings("block", &block, acceptSingle: false, nonEmpty: false)
    try c.objects("identify", &identify)
  }
}

/// The answer to a directory upload: the new version and how many entries each list holds.
public struct DirectoryUploadResponse: WireCodable, Hashable {
  public var version: Int64
  public var identify: Int
  public var block: Int

  public init(version: Int64, identify: Int, block: Int) {
    self.version = version
    self.identify = identify
    self.block = block
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(version: 0, identify: 0, block: 0) }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.integer("block", &block, 0...Int64(Int32.max))
    try c.integer("identify", &identify, 0...Int64(Int32.max))
    try c.integer("version", &version, 0...Int64.max)
  }
}
