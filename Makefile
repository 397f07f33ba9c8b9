# edge: `make run` starts edge on its embedded default, `make test` runs
# every test (installing what the tests need). See README.md.

GO      ?= go
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PKGS    := ./...

.PHONY: run build test deps lint unit fuzz bench

# FUZZ lists "package target" pairs; `make fuzz` runs each briefly (CI), a
# longer FUZZTIME hunts for real.
FUZZTIME ?= 5s
FUZZ := ./allocator:FuzzParseTierConfig ./allocator:FuzzValidateID \
	./plugins:FuzzParseForm ./plugins/twilio:FuzzWebhook ./plugins/plivo:FuzzWebhook ./plugins/exotel:FuzzWebhook

run:
	$(GO) run ./cmd/edge

build:
	$(GO) build -o bin/edge ./cmd/edge

# test is the one command CI runs (.ci/run): dependencies, lint, the unit and
# integration tests under the race detector, then the slower tiers.
test: deps lint unit fuzz

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

fuzz:
	@set -e; for t in $(FUZZ); do \
		pkg=$${t%%:*}; name=$${t#*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./allocator/ ./api/
