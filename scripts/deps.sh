#!/usr/bin/env bash
# Installs what Dialtone builds and tests need on Debian 12. Idempotent: skips what is present.
# Usage: scripts/deps.sh            build + test dependencies
set -euo pipefail

APT_PACKAGES=(
  pkg-config
  # libssl/libcrypto; the openssl command makes the tests' certificates (TLS to Redis and PostgreSQL).
  libssl-dev openssl
  libwebsockets-dev libwebsockets-evlib-uv libuv1-dev
  libcurl4-openssl-dev
  # HTTP/2 framing for the APNs client (DialtoneHTTP2).
  libnghttp2-dev
  libsqlite3-dev
  # The server's allocator (dialtone-server links it; docs/benchmarks.md, "The allocator").
  libjemalloc-dev
  # The cluster store: libpq, and a real server for its tests.
  postgresql libpq-dev redis-server libhiredis-dev
  python3-pip
  # Real calls: webrtcbin and its plugins (Opus, DTLS/SRTP, SCTP, libnice ICE).
  libgstreamer1.0-dev libgstreamer-plugins-bad1.0-dev
  # webrtcbin's ICE agent, closed by us so that TURN allocations are released (shim.h).
  libnice-dev
  gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-nice gstreamer1.0-tools
  # End-to-end tests: a real TURN server and a real browser.
  coturn chromium
  # Group calls: a real SFU (the tests start their own instance from a generated configuration).
  janus
)
# kosoku: the Autobahn WebSocket test cases (scripts/autobahn.py). schemathesis: requests generated
# from docs/openapi.yaml against a real server (Tests/e2e/openapi_scenarios.py).
PIP_PACKAGES=(pyjwt cryptography h2 aiortc websockets numpy livekit-api kosoku schemathesis)
# `scripts/deps.sh bench`: also what the benchmarks compare against.
if [ "${1:-}" = "bench" ]; then
  command -v node >/dev/null || APT_PACKAGES+=(nodejs)
  APT_PACKAGES+=(node-ws)
  PIP_PACKAGES+=(aioapns)
  # bench-quality: test speech (espeak-ng, sox), PESQ (builds a C extension), ViSQOL 3 with its
  # deep-lattice speech mapper (ai-edge-litert) and numba (its hot loops, about 25x faster).
  APT_PACKAGES+=(espeak-ng sox)
  PIP_PACKAGES+=(pesq visqol-python ai-edge-litert numba scipy)
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
pip_missing=()
for p in "${PIP_PACKAGES[@]}"; do
  mod=$p; [ "$p" = pyjwt ] && mod=jwt; [ "$p" = livekit-api ] && mod=livekit.api
  [ "$p" = visqol-python ] && mod=visqol; [ "$p" = ai-edge-litert ] && mod=ai_edge_litert
  $PY -c "import $mod" 2>/dev/null || pip_missing+=("$p")
done
if [ ${#pip_missing[@]} -gt 0 ]; then
  echo "deps: pip installing ${pip_missing[*]}"
  $PY -m pip install -q "${pip_missing[@]}" 2>/dev/null || $PY -m pip install -q --break-system-packages "${pip_missing[@]}"
fi
echo "deps: ok"
