# edge: `make run` starts edge on its embedded default, `make test` runs
# every test (installing what the tests need). See README.md.

GO      ?= go
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PKGS    := ./...

.PHONY: run build test deps lint unit fuzz kube-e2e bench bench-poolmgr bench-redis-ceiling bench-redis-instructions faults faults-short faults-outside liveness-load migration-drill pod-deaths

# FUZZ lists "package target" pairs; `make fuzz` runs each briefly (CI), a
# longer FUZZTIME hunts for real.
FUZZTIME ?= 5s
FUZZ := ./allocator:FuzzParseTierConfig ./allocator:FuzzValidateID \
	./plugins:FuzzParseForm ./plugins/twilio:FuzzWebhook ./plugins/plivo:FuzzWebhook ./plugins/exotel:FuzzWebhook ./plugins/telnyx:FuzzWebhook \
	./plugins/twilio:FuzzVerifyAgainstSDK ./plugins/plivo:FuzzVerifyAgainstPlivoGo \
	./proxy/internal/tls13:FuzzTLSRecordOpen ./proxy/internal/relay:FuzzKeptOpening

run:
	$(GO) run ./cmd/edge

build:
	$(GO) build -o bin/edge ./cmd/edge

# test is the one command CI runs (.ci/run): dependencies, lint, the unit and
# integration tests under the race detector, then the slower tiers, the
# shipped image run under runc as deploy/ has the pod among them (about 9
# minutes on a fresh machine, under a minute after). node-e2e, which adds
# about 10 more on a fresh machine, stays its own target.
test: deps lint unit fuzz kube-e2e runtime-e2e faults-short

# deps installs what the tests run for real: redis-server (also run as a
# sentinel: redis-server --sentinel), redis-cli (creates the test Redis
# Cluster), etcd for the kube-e2e tier, promtool (Debian's prometheus
# package) for the alert rules' unit tests, openssl (s_client, the
# second TLS implementation the proxy's TLS record layer is tested against),
# python3-websockets, a WebSocket server edge did not write, run as a pod
# (proxy TestPodIsBlamedOnlyForItsOwnBehaviour), and chromium, the headless browser the admin status page is rendered in
# (cmd/edge TestStatusPageInHeadlessChromium; its install, apt-get update
# included, took 35 s of wall time on a 2-core machine).
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	command -v etcd >/dev/null 2>&1 || missing="$$missing etcd-server"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v openssl >/dev/null 2>&1 || missing="$$missing openssl"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	/usr/bin/python3 -c 'import websockets' >/dev/null 2>&1 || missing="$$missing python3-websockets"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (Debian packages)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# migration-drill runs docs/migration.md's runbook, every rollback included,
# with calls never stopping through both routers on one Redis (the
# predecessor replayed from its command sequences), 3 s per state, and
# prints the calls lost, double-served and refused and the pods or slots
# leaked (allocator TestMigrationDrill; `make unit` runs it at 300 ms per
# state). docs/migration.md cites its figures.
migration-drill: deps
	EDGE_DRILL_STATE=3s $(GO) test -race -count=1 -run TestMigrationDrill -v ./allocator

lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	@# Comments and docs say what the code does and why, never which issue
	@# or wave wrote it (test/lint/processwords.sh).
	@test/lint/processwords.sh
	@$(GO) mod tidy -diff >/dev/null || { echo "go mod tidy would change go.mod/go.sum: run go mod tidy"; exit 1; }
	@# client-go's generated clientset, informers and leader election register
	@# every API group's types: 51 MB of binary and 18 MB of idle RSS for the
	@# two kinds edge reads (docs/benchmarks.md). poolmgr uses the REST client.
	@heavy="$$($(GO) list -deps ./cmd/edge | grep -E '^k8s.io/client-go/(kubernetes|informers|tools/leaderelection)(/|$$)' || true)"; \
	if [ -n "$$heavy" ]; then echo "cmd/edge links client-go's generated clients:"; echo "$$heavy"; exit 1; fi

unit:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

fuzz:
	@test/fuzz/run.sh $(GO) $(FUZZTIME) $(FUZZ)

# kube-e2e runs the pool manager against a real kube-apiserver and etcd on
# loopback. The first run on a machine builds kube-apiserver from the Go
# module proxy (~10 CPU-minutes), cached in $$HOME/.cache/edge-kube-e2e.
kube-e2e: deps
	test/kube-e2e/run.sh

bench-poolmgr: deps
	$(GO) test -run '^$$' -bench . -benchtime 20x -count 3 ./poolmgr

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./allocator/ ./api/

# bench-redis-ceiling measures how many concurrent calls one Redis holds
# (bench/cmd/redisceiling): CEILING_CALLS live calls over 4 replicas
# through the allocator's real scripts, calls of 3 minutes on average,
# each socket renewed every allocator.renew_interval in its replica's
# batch, beats, election, sweeps and reconciles running; Redis' CPU as a
# share of one core, per node, then each part costed alone. Once on one
# redis-server, once on a Redis Cluster of 3 masters (docs/benchmarks.md,
# "How many calls one Redis holds"). About 12 minutes on a 2-core machine;
# CEILING_ARGS adds flags (-window 20s, -slots 1, -resumable 1).
CEILING_CALLS ?= 10000,50000,100000
bench-redis-ceiling: deps
	$(GO) run ./bench/cmd/redisceiling -calls $(CEILING_CALLS) $(CEILING_ARGS)
	$(GO) run ./bench/cmd/redisceiling -calls $(CEILING_CALLS) -cluster 3 $(CEILING_ARGS)

# bench-redis-instructions counts the instructions redis-server runs per
# allocate+release cycle under valgrind's callgrind (bench/redis-
# instructions.sh): a figure the machine's other work does not move.
# BASE=<commit> counts that commit's too. Needs valgrind.
bench-redis-instructions: deps
	bench/redis-instructions.sh

# faults runs the fault suite (cmd/edge TestFaultSuite: 3 replicas, a real
# Redis, 12 WebSocket pods, calls of 2-20 s, one fault at a time, invariants
# and recovery times after each) and reruns the focused fault tests verbose,
# so that their figures show (docs/reliability.md). faults-short is the CI
# form: calls of 1-2 s, then the outside suite's short form (test/outside
# TestOutsideSuite: what the pods and a Twilio-like provider saw through a
# readiness-honouring balancer; 3 faults, calls of 6 s, default timings);
# about 10 minutes on a slow machine. faults-outside is the outside suite's
# long form: 5 calls/s of 20 s on 64 pods, every fault, default timings
# (about 30 minutes).
FAULTS := TestRedisRestartedEmptyNeverDoubleServes|TestSentinelFailoverUnderLoad|TestCluster|TestRedisOutage|TestRedisRestartedEmpty|TestKubeLeaderChangeMidSweepIsFenced|TestRedisLeaderChangeMidSweep|TestKubeTakeoverAfterGracefulStopSkipsTheRetryPeriod|TestRedisTakeoverAfterGracefulStopSkipsTheRetryPeriod|TestMediaPathEndToEnd|TestKubeRecreatedLeaseLeaderIsNotRefused|TestMerchantConfigRestoredAfterRedisEmptied|TestLeaderReleasesBeforeTheDrainOnSIGTERM
faults: deps
	EDGE_FAULT_SUITE=long $(GO) test -count=1 -v -timeout 30m -run '^TestFaultSuite$$' ./cmd/edge/
	$(GO) test -race -count=1 -v -run '^($(FAULTS))$$' ./allocator/ ./poolmgr/ ./cmd/edge/ ./test/outside/

# liveness-load streams 1,000 sockets for 30 s on each relay to quiet
# agents that only answer edge's pings: no healthy pod may be taken for
# hung (docs/media.md, "Hung agents, measured").
liveness-load: deps
	EDGE_LIVENESS_LOAD=1000 EDGE_LIVENESS_SECONDS=30 $(GO) test -count=1 -v -timeout 10m -run '^TestNoHungVerdictUnderLoad$$' ./proxy/

# pod-deaths kills the agent serving a call mid-call DEATHS times in each
# of six ways (SIGKILL, reset, FIN without a close frame, leaving
# pods.static, SIGSTOP, a blocked event loop) on each relay, against the
# binary and python3-websockets agents run as their own processes, all
# calls opted in to proxy.resume, and prints the calls kept, the caller's
# gap p50/p99, frames lost and stale marks at the new agent
# (test/measure/pod-deaths.py; docs/media.md, "Pod deaths, measured").
# About 11 minutes per relay on a 2-core machine at 100; POD_DEATHS_ARGS
# narrows it (--kinds kill,reset --relays goroutines).
DEATHS ?= 100
pod-deaths: deps
	$(GO) build -o bin/edge ./cmd/edge
	/usr/bin/python3 test/measure/pod-deaths.py bin/edge --deaths $(DEATHS) $(POD_DEATHS_ARGS)

faults-short: deps
	EDGE_FAULT_SUITE=short $(GO) test -p 1 -count=1 -v -timeout 30m -run '^(TestFaultSuite|TestOutsideSuite)$$' ./cmd/edge/ ./test/outside/

faults-outside: deps
	EDGE_FAULT_SUITE=long $(GO) test -count=1 -v -timeout 60m -run '^TestOutsideSuite$$' ./test/outside/

# image builds edge's image, $(IMAGE), with no network and no registry:
# deploy/image/build.sh lays out the Dockerfile's filesystem from this
# checkout (deploy/image/rootfs.sh, the static binary) and podman copies
# it onto an empty base in the Dockerfile's runtime stage. runtime-e2e
# runs that image under runc as deploy/ has the pod (securityContext,
# each shipped seccomp profile, volumes, env; test/runtime-e2e), about a
# minute once the image is built; runtime-deps installs podman and runc.
IMAGE   ?= localhost/edge:dev
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
.PHONY: image runtime-deps runtime-e2e

runtime-deps:
	@missing=""; \
	command -v podman >/dev/null 2>&1 || missing="$$missing podman"; \
	command -v runc >/dev/null 2>&1 || missing="$$missing runc"; \
	[ -d /usr/lib/cni ] || missing="$$missing containernetworking-plugins"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (Debian packages)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

image: runtime-deps
	VERSION=$(VERSION) deploy/image/build.sh $(IMAGE)

runtime-e2e: deps image
	EDGE_RUNTIME_IMAGE=$(IMAGE) test/runtime-e2e/run.sh

# node-e2e runs deploy/ on a real single-node Kubernetes inside a network
# namespace of its own (etcd, kube-apiserver, controller-manager,
# scheduler, containerd + runc + the CNI bridge, kubelet, kube-proxy,
# CoreDNS), places calls through the edge Service and rolls edge and the
# agents with calls on the line, force-deletes an agent holding a call (one
# ending with it; one of the merchant opted in to proxy.resume, which moves
# to another agent) and deletes the leading edge pod (test/node-e2e;
# scenarios in docs/node-e2e.md). Run it before every change
# to deploy/ or to edge's start-up and shutdown. The first run on a machine
# builds kubelet, kube-controller-manager, kube-scheduler, kube-proxy,
# kubectl and CoreDNS from the Go module proxy, cached beside kube-e2e's
# kube-apiserver; figures in docs/node-e2e.md. node-deps installs
# containerd and conntrack (and what runtime-deps and deps install).
.PHONY: node-deps node-e2e
node-deps: deps runtime-deps
	@missing=""; \
	command -v containerd >/dev/null 2>&1 || missing="$$missing containerd"; \
	command -v conntrack >/dev/null 2>&1 || missing="$$missing conntrack"; \
	command -v nsenter >/dev/null 2>&1 || missing="$$missing util-linux"; \
	command -v iptables >/dev/null 2>&1 || missing="$$missing iptables"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (Debian packages)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

node-e2e: node-deps image
	$(SUDO) env PATH="$$PATH" HOME="$$HOME" EDGE_NODE_E2E_IMAGE=$(IMAGE) test/node-e2e/run.sh
