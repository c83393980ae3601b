# Dialtone — two commands: `make run` (a server with embedded defaults) and `make test`.
SWIFT ?= swift
DATA_DIR ?= ./data
HOST ?= 127.0.0.1
PORT ?= 8080
CONNECTIONS ?= 15000

.PHONY: deps build release run test test-unit bench-ws clean

deps:
	@scripts/deps.sh

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

run: release
	@echo ""
	@echo "Dialtone signaling server: http://$(HOST):$(PORT)  (WebSocket: ws://$(HOST):$(PORT)/v1/ws)"
	@echo "Get a client token in another terminal:"
	@echo "  .build/release/dialtone token --user alice --device phone --data-dir $(DATA_DIR)"
	@echo "Stop with Ctrl-C."
	@echo ""
	.build/release/dialtone-server --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

# Builds once, then runs every test target (unit and loopback integration tests).
test: deps
	$(SWIFT) build --build-tests
	scripts/run-tests.sh

bench-ws: release
	.build/release/dialtone bench-ws --connections $(CONNECTIONS)

clean:
	rm -rf .build
