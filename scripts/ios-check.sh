#!/usr/bin/env bash
# `make ios-check`: the iOS build, type-checked on Linux (docs/ios.md, section 15). The portable
# core, every Apple/ target and the Call Directory extension are type-checked for
# arm64-apple-ios17.0 against a real iPhoneOS SDK and Google WebRTC's headers by the shared
# ios-typecheck tool. Neither the tool nor the SDK belongs to this repository (nothing of Apple's
# or Google's is committed): without either, this prints one `ios-check: skipped (...)` line and
# exits 0, so `make test` carries on where they are absent (CI).
#
#   IOS_TYPECHECK  the tool's typecheck.sh (default: ../shared/tools/ios-typecheck/typecheck.sh,
#                  beside the repository)
#   IOS_SDK_ROOT   what the tool's prepare.sh laid out (default: /opt/ios-typecheck)
#
# A warning fails the check as an error does (the project builds without warnings).
set -uo pipefail
cd "$(dirname "$0")/.."
tool=${IOS_TYPECHECK:-../shared/tools/ios-typecheck/typecheck.sh}
root=${IOS_SDK_ROOT:-/opt/ios-typecheck}
sdk="$root/iPhoneOS17.0.sdk"
if [ ! -f "$tool" ]; then
  echo "ios-check: skipped (no type-check tool at $tool; set IOS_TYPECHECK)"
  exit 0
fi
if [ ! -d "$sdk" ] || [ ! -d "$root/WebRTC.framework" ]; then
  echo "ios-check: skipped (no SDK at $sdk; set IOS_SDK_ROOT)"
  exit 0
fi

# In dependency order: each module is checked against the ones before it.
core="DialtoneJSON DialtoneSupport DialtoneProtocol DialtoneClient"
apple="DialtoneURLSession DialtoneWebRTC DialtoneCallKit DialtoneCallDirectory"
extensions="Apple/Example/DialtoneCallDirectoryExtension"
# Checked only where LiveKit's Swift SDK is laid out beside the SDK (docs/ios.md, section 15).
unchecked="DialtoneLiveKit"

# A target added to Apple/Sources must be added above (or to `unchecked`, with the reason in
# docs/ios.md): it is never left out silently.
for dir in Apple/Sources/*/; do
  name=$(basename "$dir")
  case " $apple $unchecked " in
    *" $name "*) ;;
    *)
      echo "ios-check: Apple/Sources/$name is in no list of scripts/ios-check.sh"
      exit 1
      ;;
  esac
done

log=$(mktemp)
trap 'rm -rf "$log"' EXIT
OUT="$root" SDK="$sdk" CORE_MODULES="$core" APPLE_MODULES="$apple" EXTENSIONS="$extensions" \
  bash "$tool" . 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
# Apple/Package.swift builds its targets in Swift 5 mode with complete concurrency checking; the
# code is kept building in Swift 6 mode too (the switch is one line there): checked as well.
if [ "$status" = 0 ]; then
  echo "-- the Apple targets again, in Swift 6 mode"
  OUT="$root" SDK="$sdk" CORE_MODULES="$core" APPLE_MODULES="$apple" EXTENSIONS=" " APPLE_SWIFT_MODE=6 \
    bash "$tool" . 2>&1 | grep -v '^ok Dialtone\(JSON\|Support\|Protocol\|Client\) ' | tee -a "$log"
  status=${PIPESTATUS[0]}
fi
for name in $unchecked; do echo "-- $name: not checked (its SDK is not laid out here; docs/ios.md, section 15)"; done
if [ "$status" = 0 ] && grep -q "warning: " "$log"; then
  echo "ios-check: warnings (above) for arm64-apple-ios17.0"
  status=1
fi
exit "$status"
