# Dialtone — two commands: `make run` (a server with embedded defaults) and `make test`.
SWIFT ?= swift
DATA_DIR ?= ./data
HOST ?= 127.0.0.1
PORT ?= 8080
CONNECTIONS ?= 15000

.PHONY: deps bench-deps build release run test format lint ios-check autobahn-full bench-ws bench-signaling bench-signaling-sequential bench-signaling-ab bench-push bench-gate bench-setup bench-codec bench-group bench-video bench-video-change bench-cluster bench-sizing bench-private-preconnect bench-quality fuzz clean

deps:
	@scripts/deps.sh

build: deps
	$(SWIFT) build

# Release builds optimise across modules: the server's hot path runs through a dozen small
# modules (JSON, protocol, calls, sessions, network) whose generic code is otherwise called
# unspecialised across each boundary (docs/benchmarks.md, "A lean single node"). A compiler
# flag here, not in Package.swift: unsafe flags in the manifest would stop apps from depending
# on the SDK's products by URL.
RELEASE_FLAGS ?= -Xswiftc -cross-module-optimization

release: deps
	$(SWIFT) build -c release $(RELEASE_FLAGS)

run: release
	@echo ""
	@echo "Dialtone signaling server: http://$(HOST):$(PORT)  (WebSocket: ws://$(HOST):$(PORT)/v1/ws)"
	@echo "Get a client token in another terminal:"
	@echo "  .build/release/dialtone token --user alice --device phone --data-dir $(DATA_DIR)"
	@echo "Stop with Ctrl-C."
	@echo ""
	.build/release/dialtone-server --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

# Source layout follows .swift-format: `make format` applies it, `make lint` (part of `make test`) checks it.
FORMATTED = Sources Tests Package.swift Apple FuzzTesting/Package.swift FuzzTesting/Sources
format:
	$(SWIFT) format --in-place --recursive --parallel $(FORMATTED)
lint:
	$(SWIFT) format lint --strict --recursive --parallel $(FORMATTED)

# The iOS build, type-checked on Linux: the core, every Apple/ target and the Call Directory
# extension for arm64-apple-ios17.0 (docs/ios.md, section 15). Needs the iPhoneOS SDK laid out by
# ../shared/tools/ios-typecheck (IOS_SDK_ROOT, default /opt/ios-typecheck); without it, one
# "ios-check: skipped" line. `make test` runs it too.
ios-check:
	@scripts/ios-check.sh

# Builds once, then runs every test target (unit and loopback integration tests).
test: deps lint
	$(SWIFT) build --build-tests
	scripts/run-tests.sh

# Every Autobahn WebSocket case against the server and the client, 9.* (performance, up to 16 MiB
# messages) included: the echo endpoint and the client get 16 MiB limits for it (`make test` runs
# all but 9.* with the server's own limits). Reports in .build/autobahn/.
autobahn-full: build
	python3 scripts/autobahn.py --bin .build/debug --full

bench-deps:
	@scripts/deps.sh bench

bench-ws: release
	.build/release/dialtone-bench ws --connections $(CONNECTIONS)

# K concurrent calls relayed at RATE msg/s with IDLE idle sockets held, Dialtone and Node + ws up at
# once, the load switched between them in 4 s slices (A B B A), 40 s each: the ratio and its spread
# from one stretch of the machine's time (docs/benchmarks.md, "An interleaved bench-signaling": 1 s
# slices charged Dialtone more than Node, so the Node figure takes longer ones).
CALLS ?= 100
IDLE ?= 10000
RATE ?= 5000
bench-signaling: release bench-deps
	.build/release/dialtone-bench signaling --interleave --slice 4 --calls $(CALLS) --idle $(IDLE) --rate $(RATE) --seconds 40

# The same load on Dialtone for 20 s, then on Node for 20 s (as bench-gate runs it).
bench-signaling-sequential: release bench-deps
	.build/release/dialtone-bench signaling --calls $(CALLS) --idle $(IDLE) --rate $(RATE) --seconds 20

# Two dialtone-server binaries, interleaved as above: A's CPU per relayed message ÷ B's, with its
# spread. make bench-signaling-ab A=/tmp/x/dialtone-server B=/tmp/main/dialtone-server
A ?= .build/release/dialtone-server
bench-signaling-ab: release
	@test -n "$(B)" || { echo "bench-signaling-ab: give B=<the baseline dialtone-server>"; exit 2; }
	.build/release/dialtone-bench signaling --interleave --server-binary $(A) --baseline-binary $(B) \
	  --calls $(CALLS) --idle $(IDLE) --rate $(RATE) --seconds 20

clean:
	rm -rf .build

# The signaling load (CALLS concurrent calls at CLUSTER_RATE msg/s, CLUSTER_IDLE idle sockets) against one
# server with its embedded defaults, one cluster node, and three nodes on one PostgreSQL and one Redis
# with every caller and callee on different nodes: latency, CPU per message (Redis's share) and memory
# per socket.
CLUSTER_IDLE ?= 15000
CLUSTER_RATE ?= 2000
bench-cluster: release bench-deps
	python3 bench/cluster_bench.py --bin .build/release --calls $(CALLS) --idle $(CLUSTER_IDLE) --rate $(CLUSTER_RATE)

# The unit costs docs/deploy.md's "Sizing a cluster" is computed from (docs/benchmarks.md).
bench-sizing: release bench-deps
	python3 bench/sizing_bench.py --bin .build/release --idle 15000 --candidates 20 5 --redis-cluster \
	  --shard-rate 500 --shard-candidates 5

# VoIP pushes to the APNs mock over one HTTP/2 connection, then the same through aioapns.
PUSHES ?= 5000
bench-push: release bench-deps
	.build/release/dialtone-bench push --pushes $(PUSHES)

# The regression gate (about a minute): short bench-signaling, bench-ws and bench-push against
# the Node relay and aioapns in one run; fails when a figure is worse than the one recorded in
# docs/benchmarks.md ("make bench-gate") by more than the noise recorded there. Not part of
# `make test`. Run it before resolving an issue that touches the server's hot paths.
bench-gate: release bench-deps
	python3 bench/bench_gate.py --bin .build/release

# Call set-up time (dial → ICE connected → first audio) between two network namespaces joined by
# a userspace delay/loss link: Dialtone with and without trickle ICE, and aiortc ↔ aiortc.
SETUP_CALLS ?= 10
bench-setup: release
	python3 bench/setup_bench.py --bin .build/release --calls $(SETUP_CALLS)

# Group calls of 3, 5 and 8 CLI softphones through the server and Janus, against the same people
# as a full mesh of 1:1 calls: accept → first audio, and CPU per participant.
GROUP_SIZES ?= 3,5,8
GROUP_ROUNDS ?= 3
bench-group: release
	python3 bench/group_bench.py --bin .build/release --sizes $(GROUP_SIZES) --rounds $(GROUP_ROUNDS)

# Video calls over a capped, lossy link (300 kbit/s, 1 Mbit/s, uncapped; 0 and 2 % loss): CLI ↔ CLI
# against Chromium ↔ Chromium on the same camera content: first frame, fps, link bitrate, stalls.
VIDEO_ROUNDS ?= 3
VIDEO_DURATION ?= 12
bench-video: release
	python3 bench/video_bench.py --bin .build/release --rounds $(VIDEO_ROUNDS) --duration $(VIDEO_DURATION)

# The media gaps of mid-call video changes (upgrade, camera on, downgrade): CLI ↔ CLI against
# Chromium ↔ Chromium; CHANGE_RTT_MS=50 runs them over the delay link instead of one namespace.
CHANGE_ROUNDS ?= 5
CHANGE_RTT_MS ?= 0
bench-video-change: release
	python3 bench/video_change_bench.py --bin .build/release --rounds $(CHANGE_ROUNDS) --rtt-ms $(CHANGE_RTT_MS)

# What a private pre-connect leg costs: Answer → first audio with a relay-only leg, a leg with
# every candidate and no leg (no TURN), and what coturn relays for a private leg's call.
PRIVATE_CALLS ?= 5
PRIVATE_RTT_MS ?= 40
bench-private-preconnect: release
	python3 bench/private_preconnect_bench.py --bin .build/release --calls $(PRIVATE_CALLS) --rtt-ms $(PRIVATE_RTT_MS)

# How calls sound (PESQ-WB, ViSQOL) through a shaped namespace link: random and bursty loss, jitter,
# 150 ms RTT and a network switch, for CLI ↔ CLI, the browser page ↔ CLI and Chromium ↔ Chromium in
# the same run (bench/quality_bench.py). QUALITY_CALLS good calls per cell (about 40 min at 3, 28 at 2);
# the table is printed and the figures land in .build/bench-quality/.
QUALITY_CALLS ?= 3
QUALITY_CONDITIONS ?= clean,loss5,loss10,loss20,burst5,burst15,jitter30,jitter30r,rtt150
QUALITY_SWITCH_CALLS ?= 2
bench-quality: release bench-deps
	python3 bench/quality_bench.py --bin .build/release --calls $(QUALITY_CALLS) \
		--conditions $(QUALITY_CONDITIONS) --switch-calls $(QUALITY_SWITCH_CALLS)

# The signaling codec against Foundation's JSONDecoder/JSONEncoder on the relay's messages.
bench-codec: release
	.build/release/dialtone-bench codec

# libFuzzer harnesses for every parser a client can reach (FuzzTesting/), FUZZ_SECONDS each, two
# at a time; crashes land in FuzzTesting/crashes/. `make test` replays the seeds and regressions.
FUZZ_SECONDS ?= 60
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh
