// Command redisceiling measures how many concurrent calls one Redis holds:
// the Redis work of N live calls, driven through the allocator's real API
// (the same scripts, batching and cadences as edge's replicas) against a
// real redis-server, without N real sockets.
//
// R replicas (one allocator and one client each, named as edge names
// them) share the calls: each call's webhook lands on a random replica
// (its nonce, then Allocate), its media socket on another random one
// (Claim, then MarkResumable for -resumable of the calls), which renews
// it with every other socket it holds in one batched Renew per
// renew_interval, and releases it when the call ends
// (Release); the provider's status callback then reaches a
// random replica (its nonce, then EndByProvider). Every replica also runs
// what edge runs whatever its calls: the presence beat (poolmgr.Presence,
// with the dead-replica check), the tier refresher, leader election and,
// on the leader, the watcher, reconciler and zombie sweeper
// (poolmgr.Manager), the probe loop's read of the ejected pods, the
// readiness PING, and a Prometheus scrape of the pool collector.
//
// Calls last an exponentially distributed time of mean -call-duration and
// arrive at N / mean per second, so that N stay live; the run starts with
// N calls allocated at once, each with the remaining time of a call in
// progress (the same distribution: it has no memory). After -warmup it
// measures for -window: Redis' CPU (INFO cpu, used_cpu_user +
// used_cpu_sys, per node) as a share of one core, the commands Redis ran,
// the round trips the replicas made, and each operation's latency as the
// replicas saw it; and whether the generator kept its schedule (a late
// generator understates the load: it says so). Then, everything stopped,
// it measures what each part costs Redis on its own (one renewal pass of
// every socket, a batch of whole call lifecycles, one sweep, one
// reconcile, a second of beats), to say what dominates.
//
//	go run ./bench/cmd/redisceiling -calls 10000,50000,100000
//	go run ./bench/cmd/redisceiling -calls 100000 -cluster 3
//
// docs/benchmarks.md, "How many calls one Redis holds", has the figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/mediacontract"
	"github.com/edge-voice/edge/poolmgr"
)

type options struct {
	calls        []int
	replicas     int
	duration     time.Duration
	resumable    float64
	callback     bool
	slots        int
	headroom     float64
	merchants    int
	warmup       time.Duration
	window       time.Duration
	scrape       time.Duration
	workers      int
	cluster      int
	redisURL     string
	renew        time.Duration
	lifecycles   int
	podTierShare bool
}

func main() {
	var o options
	calls := flag.String("calls", "10000,50000,100000", "concurrent live calls to hold, comma-separated: one run (a fresh Redis) each")
	flag.IntVar(&o.replicas, "replicas", 4, "edge replicas sharing the calls")
	flag.DurationVar(&o.duration, "call-duration", 3*time.Minute, "mean call duration (exponentially distributed)")
	flag.Float64Var(&o.resumable, "resumable", 0.5, "share of calls whose socket marks them resumable (proxy.resume)")
	flag.BoolVar(&o.callback, "status-callback", true, "the provider's status callback ends each call too (a nonce and EndByProvider after the socket's release)")
	flag.IntVar(&o.slots, "slots", 20, "calls per pod: max_concurrent of the one shared tier (1: an exclusive tier)")
	flag.Float64Var(&o.headroom, "headroom", 1.25, "pods seeded per pod the calls need")
	flag.IntVar(&o.merchants, "merchants", 200, "merchants the calls belong to (each with its live-call set)")
	flag.DurationVar(&o.warmup, "warmup", 20*time.Second, "steady time after the N calls are up, before measuring")
	flag.DurationVar(&o.window, "window", 60*time.Second, "measured steady window (60 s covers 3 renewals, 2 sweeps and 1 reconcile at the defaults)")
	flag.DurationVar(&o.scrape, "scrape", 15*time.Second, "Prometheus scrape interval of each replica's pool collector (0: none)")
	flag.IntVar(&o.workers, "workers", 512, "goroutines running call starts and ends")
	flag.IntVar(&o.cluster, "cluster", 0, "run on a Redis Cluster of this many masters instead of one redis-server (key prefix {voice}:)")
	flag.StringVar(&o.redisURL, "redis-url", "", "measure an existing Redis (redis://host:port) instead of starting one; it must be empty")
	flag.DurationVar(&o.renew, "renew-interval", allocator.DefaultConfig().RenewInterval, "allocator.renew_interval")
	flag.IntVar(&o.lifecycles, "lifecycles", 3000, "whole call lifecycles run alone after the window, to cost one")
	flag.Parse()
	for _, f := range strings.Split(*calls, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "-calls: %q is not a positive count\n", f)
			os.Exit(2)
		}
		o.calls = append(o.calls, n)
	}
	fmt.Printf("machine: %d CPUs (GOMAXPROCS %d), %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), loadavg())
	fmt.Printf("replicas %d, mean call %v, resumable %.0f%%, status callback %v, %d calls per pod, headroom %.2f, %d merchants, renew every %v, scrape every %v\n",
		o.replicas, o.duration, o.resumable*100, o.callback, o.slots, o.headroom, o.merchants, o.renew, o.scrape)
	var rows []result
	for _, n := range o.calls {
		r, err := run(o, n)
		if err != nil {
			fmt.Fprintf(os.Stderr, "calls %d: %v\n", n, err)
			os.Exit(1)
		}
		rows = append(rows, r)
	}
	fmt.Println()
	fmt.Println("| live calls | Redis CPU, share of one core (per node) | per live call | commands/s | round trips/s | allocate p99 | claim p99 | release p99 | renew batch p99 | generator behind |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Println(r.row())
	}
}

// call is one live call as the replicas hold it.
type call struct {
	id, pod, holder string
	merchant        string
	web             *replica // where its webhook landed
	socket          *replica // where its media socket is
	resumable       bool
}

// replica is one edge replica: its allocator, its client and the media
// sockets it holds.
type replica struct {
	name  string
	rdb   redis.UniversalClient
	a     *allocator.Allocator
	ml    allocator.MediaLeases
	reg   *prometheus.Registry
	trips *tripCounter

	mu    sync.Mutex
	socks map[string]*call
}

func (r *replica) leases() []mediacontract.Lease {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]mediacontract.Lease, 0, len(r.socks))
	for _, c := range r.socks {
		out = append(out, mediacontract.Lease{CallID: c.id, Pod: c.pod, Holder: c.holder})
	}
	return out
}

type result struct {
	calls       int
	cluster     bool
	shares      []float64
	commands    float64
	trips       float64
	lat         map[string]dist
	behind      string
	live        float64
	attribution string
	// What the test judges: renewals held and not, and failed operations.
	renewed, notHeld int64
	errors           map[string]int64
	nodeCommands     []float64 // commands/s per node
}

func (r result) row() string {
	var sh []string
	for _, s := range r.shares {
		sh = append(sh, fmt.Sprintf("%.1f%%", s*100))
	}
	cpu := strings.Join(sh, " / ")
	ms := func(op string) string {
		d, ok := r.lat[op]
		if !ok {
			return "-"
		}
		return fmt.Sprintf("%.1f ms", float64(d.p99.Microseconds())/1000)
	}
	var busiest float64
	for _, s := range r.shares {
		busiest = max(busiest, s)
	}
	return fmt.Sprintf("| %d (%.0f held) | %s | %.1f µs/s | %.0f | %.0f | %s | %s | %s | %s | %s |",
		r.calls, r.live, cpu, busiest/r.live*1e6, r.commands, r.trips, ms("allocate"), ms("claim"), ms("release"), ms("renew_batch"), r.behind)
}

// generator drives the calls of one run.
type generator struct {
	o        options
	n        int
	replicas []*replica
	lat      *latencies
	jobs     chan job
	live     atomic.Int64
	seq      atomic.Int64
	stopped  atomic.Bool
	errs     sync.Map // op -> *atomic.Int64
	firstErr sync.Map // op -> error

	lagMu   sync.Mutex
	lags    []time.Duration // start jobs' delay past their due time, in the window
	lagOn   atomic.Bool
	renewed atomic.Int64 // leases renewed (held) in the window
	lost    atomic.Int64 // leases not held at a renewal, in the window
	passes  atomic.Int64

	rampMu sync.Mutex
	ramp   []*call // the calls in progress at the start, until their ends are set
}

type job struct {
	due time.Time
	f   func()
}

func (g *generator) fail(op string, err error) {
	v, _ := g.errs.LoadOrStore(op, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	g.firstErr.LoadOrStore(op, err)
}

func (g *generator) pick() *replica { return g.replicas[rand.IntN(len(g.replicas))] }

// newCall is a call about to arrive: its webhook lands on one replica, its
// socket on another (each at random, as behind a balancer).
func (g *generator) newCall() *call {
	id := fmt.Sprintf("CA%016x%08x", g.seq.Add(1), rand.Uint32())
	sock := g.pick()
	return &call{id: id, merchant: "m" + strconv.Itoa(rand.IntN(g.o.merchants)), web: g.pick(), socket: sock,
		holder: sock.name + "/" + id, resumable: rand.Float64() < g.o.resumable}
}

// The steps of a call, each one operation of edge's on Redis; false when
// the call cannot go on.
func (g *generator) stepNonce(c *call) bool {
	t := time.Now()
	if _, err := c.web.a.FirstUse(context.Background(), "twilio", c.id+":webhook", 15*time.Minute); err != nil {
		g.fail("nonce", err)
	}
	g.lat.since("nonce", t)
	return true
}

func (g *generator) stepAllocate(c *call) bool {
	t := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	al, err := c.web.a.Allocate(ctx, allocator.Request{CallID: c.id, MerchantID: c.merchant, Creator: "provider:twilio"})
	cancel()
	g.lat.since("allocate", t)
	if err != nil {
		g.fail("allocate", err)
		return false
	}
	c.pod = al.PodName
	return true
}

func (g *generator) stepClaim(c *call) bool {
	t := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	cl, err := c.socket.ml.Claim(ctx, c.id, c.pod, c.holder)
	cancel()
	g.lat.since("claim", t)
	if err != nil {
		g.fail("claim", err)
		return false
	}
	c.pod = cl.Pod
	s := c.socket
	s.mu.Lock()
	s.socks[c.id] = c
	s.mu.Unlock()
	g.live.Add(1)
	return true
}

func (g *generator) stepMark(c *call) bool {
	if !c.resumable {
		return true
	}
	t := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	if err := c.socket.ml.MarkResumable(ctx, c.id, c.holder); err != nil {
		g.fail("mark_resumable", err)
	}
	cancel()
	g.lat.since("mark_resumable", t)
	return true
}

func (g *generator) stepRelease(c *call) bool {
	s := c.socket
	s.mu.Lock()
	delete(s.socks, c.id)
	s.mu.Unlock()
	g.live.Add(-1)
	t := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := s.ml.Release(ctx, c.id, mediacontract.SocketEnd{Ended: "socket_close", ClosedBy: "client", CloseCode: "1000",
		Closed: time.Now(), MessagesIn: 9000, MessagesOut: 9000, BytesIn: 1 << 20, BytesOut: 1 << 20})
	cancel()
	g.lat.since("release", t)
	if err != nil {
		g.fail("release", err)
	}
	return true
}

// stepCallback is the provider's status callback, on a replica of its own:
// its nonce, then EndByProvider (the socket's release came first, so it
// finds the call ended).
func (g *generator) stepCallback(c *call) bool {
	if !g.o.callback {
		return true
	}
	web := g.pick()
	t := time.Now()
	if _, err := web.a.FirstUse(context.Background(), "twilio", c.id+":completed", 15*time.Minute); err != nil {
		g.fail("nonce", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := web.a.EndByProvider(ctx, c.id, "provider:twilio", "", "completed")
	cancel()
	g.lat.since("status_callback", t)
	if err != nil && !errors.Is(err, allocator.ErrCallNotFound) {
		g.fail("status_callback", err)
	}
	return true
}

// start is one call's arrival; it ends after remaining, or, for a call
// of the ramp (remaining 0), once the ramp is over.
func (g *generator) start(remaining time.Duration) {
	c := g.newCall()
	for _, step := range []func(*call) bool{g.stepNonce, g.stepAllocate, g.stepClaim, g.stepMark} {
		if !step(c) {
			return
		}
	}
	if remaining == 0 {
		g.rampMu.Lock()
		g.ramp = append(g.ramp, c)
		g.rampMu.Unlock()
		return
	}
	g.endAfter(c, remaining)
}

func (g *generator) endAfter(c *call, remaining time.Duration) {
	due := time.Now().Add(remaining)
	time.AfterFunc(remaining, func() {
		if !g.stopped.Load() {
			g.jobs <- job{due: due, f: func() { g.end(c) }}
		}
	})
}

// end is the call's end: its socket's release, then the provider's status
// callback.
func (g *generator) end(c *call) {
	g.stepRelease(c)
	g.stepCallback(c)
}

func (g *generator) worker(done <-chan struct{}) {
	for {
		var j job
		select {
		case <-done:
			return
		case j = <-g.jobs:
		}
		if g.lagOn.Load() {
			lag := time.Since(j.due)
			g.lagMu.Lock()
			g.lags = append(g.lags, lag)
			g.lagMu.Unlock()
		}
		j.f()
	}
}

// arrivals starts N / mean-duration calls a second until ctx ends.
func (g *generator) arrivals(ctx context.Context) {
	rate := float64(g.n) / g.o.duration.Seconds()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	var owed float64
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			owed += rate * now.Sub(last).Seconds()
			last = now
			for ; owed >= 1; owed-- {
				rem := time.Duration(rand.ExpFloat64() * float64(g.o.duration))
				g.jobs <- job{due: now, f: func() { g.start(max(rem, time.Millisecond)) }}
			}
		}
	}
}

// renewLoop is the proxy's: every renew interval after the last pass,
// every socket of the replica in one Renew (batches of
// allocator.RenewBatch).
func (g *generator) renewLoop(ctx context.Context, r *replica, offset time.Duration) {
	if !sleep(ctx, offset) {
		return
	}
	for {
		if !sleep(ctx, g.o.renew) {
			return
		}
		g.renewPass(ctx, r)
	}
}

func (g *generator) renewPass(ctx context.Context, r *replica) {
	ls := r.leases()
	if len(ls) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, g.o.renew)
	defer cancel()
	t := time.Now()
	got, err := r.ml.Renew(rctx, ls)
	took := time.Since(t)
	if err != nil {
		if ctx.Err() == nil {
			g.fail("renew", err)
		}
		return
	}
	batches := (len(ls) + allocator.RenewBatch - 1) / allocator.RenewBatch
	g.lat.add("renew_pass", took)
	g.lat.add("renew_batch", took/time.Duration(batches))
	if !g.lat.on.Load() {
		return
	}
	g.passes.Add(1)
	for _, h := range got {
		if h == mediacontract.RenewalHeld {
			g.renewed.Add(1)
		} else {
			g.lost.Add(1)
		}
	}
}

// periodic is the rest of a replica's steady Redis work.
func (g *generator) periodic(ctx context.Context, r *replica, pods []allocator.PodState, wg *sync.WaitGroup) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := r.a.Config()
	pc := poolmgr.DefaultConfig()
	metrics := poolmgr.NewMetrics(r.reg)
	registry := poolmgr.NewRegistry()
	src := &poolmgr.StaticSource{Registry: registry}
	src.Set(slices.Clone(pods))
	elector := &poolmgr.LockElector{Lock: r.a, Identity: r.name,
		LeaseDuration: pc.Leader.LeaseDuration, RenewDeadline: pc.Leader.RenewDeadline, RetryPeriod: pc.Leader.RetryPeriod,
		Log: log, Metrics: metrics}
	manager := &poolmgr.Manager{Pools: r.a, Registry: registry, Elector: elector, Log: log, Metrics: metrics,
		SweepInterval:     func() time.Duration { return pc.Pool.ZombieSweepInterval },
		ReconcileInterval: func() time.Duration { return pc.Pool.ReconcileInterval },
	}
	refresher := &poolmgr.TierRefresher{Load: r.a.LoadTierConfig, Current: func() allocator.TierConfig { return r.a.Config().Tiers },
		Apply: r.a.ApplyTiers, Restore: r.a.BootstrapTierConfig, Merchants: r.a,
		Interval: func() time.Duration { return pc.Pool.TierConfigRefresh }, Log: log, Metrics: metrics}
	presence := &poolmgr.Presence{
		Beat: func(ctx context.Context) (allocator.Beat, error) { return r.a.Heartbeat(ctx, r.name) },
		DeadReplicas: func(ctx context.Context, stale []string) (allocator.DeadReplicas, error) {
			return r.a.EndDeadReplicas(ctx, "", stale)
		},
		Interval: func() time.Duration { return cfg.HeartbeatInterval }, Log: log, Metrics: metrics}
	r.reg.MustRegister(allocator.NewPoolCollector(r.a))
	parts := []func(context.Context) error{manager.Run, refresher.Run, presence.Run,
		func(ctx context.Context) error { // the probe loop's read of the ejected pods
			loop(ctx, time.Second, func(ctx context.Context) { r.ml.Ejected(ctx) })
			return nil
		},
		func(ctx context.Context) error { // readiness: PING every second
			loop(ctx, time.Second, func(ctx context.Context) { r.rdb.Ping(ctx) })
			return nil
		},
	}
	if g.o.scrape > 0 {
		parts = append(parts, func(ctx context.Context) error {
			loop(ctx, g.o.scrape, func(context.Context) { r.reg.Gather() })
			return nil
		})
	}
	for _, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p(ctx)
		}()
	}
}

func loop(ctx context.Context, every time.Duration, f func(context.Context)) {
	for sleep(ctx, every) {
		c, cancel := context.WithTimeout(ctx, every)
		f(c)
		cancel()
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func run(o options, n int) (result, error) {
	res := result{calls: n, cluster: o.cluster > 0}
	fmt.Printf("\n== %d live calls", n)
	var nodes []*server
	rc := allocator.DefaultRedisConfig()
	switch {
	case o.redisURL != "":
		opts, err := redis.ParseURL(o.redisURL)
		if err != nil {
			return res, err
		}
		nodes = []*server{attach(opts.Addr)}
		rc.URL = o.redisURL
	case o.cluster > 0:
		var err error
		if nodes, err = startCluster(o.cluster); err != nil {
			return res, err
		}
		for _, s := range nodes {
			rc.Cluster.Addrs = append(rc.Cluster.Addrs, s.addr)
		}
		rc.KeyPrefix = "{voice}:"
		fmt.Printf(" on a Redis Cluster of %d masters", o.cluster)
	default:
		s, err := startServer()
		if err != nil {
			return res, err
		}
		nodes = []*server{s}
		rc.URL = "redis://" + s.addr
	}
	fmt.Println()
	defer func() {
		if o.redisURL == "" {
			stopAll(nodes)
		}
	}()
	if err := rc.Validate(); err != nil {
		return res, err
	}

	// The pools: one shared tier of -slots calls per pod (or exclusive),
	// enough pods for the calls and -headroom more.
	need := int(math.Ceil(float64(n) / float64(o.slots) * o.headroom))
	tier := allocator.Tier{Type: allocator.Shared, Target: need, MaxConcurrent: o.slots}
	if o.slots == 1 {
		tier = allocator.Tier{Type: allocator.Exclusive, Target: need}
	}
	tiers := allocator.TierConfig{Tiers: map[string]allocator.Tier{"agents": tier}, DefaultChain: []string{"agents"}}
	pods := make([]allocator.PodState, need)
	for i := range pods {
		pods[i] = allocator.PodState{Name: fmt.Sprintf("agent-%06d", i), Address: fmt.Sprintf("10.%d.%d.%d:8000", i>>16&255, i>>8&255, i&255), Tier: "agents", Ready: true}
	}
	fmt.Printf("pods: %d in tier agents (%s, %d calls each)\n", need, tier.Type, max(o.slots, 1))

	// As cmd/edge's config links them: admission's defaults (no rate
	// limits, a 3 s wait for capacity, which no call needs here).
	cfg := allocator.DefaultConfig()
	cfg.Admission = allocator.DefaultAdmissionConfig()
	cfg.KeyPrefix = rc.KeyPrefix
	cfg.RenewInterval = o.renew
	cfg.Tiers = tiers
	g := &generator{o: o, n: n, lat: newLatencies(), jobs: make(chan job, 1<<20)}
	ctx := context.Background()
	for i := range o.replicas {
		name := fmt.Sprintf("edge-%d", i)
		rcc := rc
		rcc.ClientName = allocator.ClientName(name)
		rdb, err := rcc.NewClient()
		if err != nil {
			return res, err
		}
		defer rdb.Close()
		trips := &tripCounter{}
		rdb.AddHook(trips)
		reg := prometheus.NewRegistry()
		a, err := allocator.New(rdb, cfg, reg)
		if err != nil {
			return res, err
		}
		a.SetReplica(name)
		bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		tc, _, err := a.BootstrapTierConfig(bctx, tiers)
		if err == nil {
			a.ApplyTiers(tc)
			err = a.Preload(bctx)
		}
		if err == nil {
			// Every replica registers the static pods at its start.
			_, err = a.SyncPods(bctx, "", slices.Clone(pods))
		}
		cancel()
		if err != nil {
			return res, fmt.Errorf("replica %s: %w", name, err)
		}
		g.replicas = append(g.replicas, &replica{name: name, rdb: rdb, a: a, reg: reg, trips: trips,
			ml: allocator.MediaLeases{Alloc: a, Replica: name}, socks: map[string]*call{}})
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	var workers sync.WaitGroup
	workersDone := make(chan struct{})
	for range o.workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			g.worker(workersDone)
		}()
	}
	for i, r := range g.replicas {
		g.periodic(runCtx, r, pods, &wg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Replicas started at different moments renew at different
			// moments.
			g.renewLoop(runCtx, r, time.Duration(i)*o.renew/time.Duration(len(g.replicas)))
		}()
	}

	// The N calls in progress, all up before any ends: then each is given
	// the remaining time of a call in progress (as long as a whole call's:
	// the distribution has no memory), and arrivals keep N live.
	t0 := time.Now()
	var ramp sync.WaitGroup
	for range n {
		ramp.Add(1)
		g.jobs <- job{due: t0, f: func() {
			defer ramp.Done()
			g.start(0)
		}}
	}
	ramp.Wait()
	for _, c := range g.ramp {
		g.endAfter(c, max(time.Duration(rand.ExpFloat64()*float64(o.duration)), time.Millisecond))
	}
	g.ramp = nil
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.arrivals(runCtx)
	}()
	fmt.Printf("ramp: %d calls up in %.1f s (%d live)\n", n, time.Since(t0).Seconds(), g.live.Load())
	sleep(ctx, o.warmup)

	// The window.
	before := make([]snapshot, len(nodes))
	for i, s := range nodes {
		var err error
		if before[i], err = s.snapshot(ctx); err != nil {
			return res, err
		}
	}
	tripsBefore := g.totalTrips()
	g.lat.on.Store(true)
	g.lagOn.Store(true)
	var liveSum, liveN float64
	cpu0 := selfCPU()
	for end := time.Now().Add(o.window); time.Now().Before(end); {
		sleep(ctx, time.Second)
		liveSum += float64(g.live.Load())
		liveN++
	}
	g.lat.on.Store(false)
	g.lagOn.Store(false)
	tripsAfter := g.totalTrips()
	genCPU := selfCPU() - cpu0
	var deltas []delta
	for i, s := range nodes {
		after, err := s.snapshot(ctx)
		if err != nil {
			return res, err
		}
		d := diff(before[i], after)
		deltas = append(deltas, d)
		res.shares = append(res.shares, d.share())
		res.commands += float64(d.total()) / d.seconds
		res.nodeCommands = append(res.nodeCommands, float64(d.total())/d.seconds)
		fmt.Printf("node %s: CPU %.1f%% of one core (%.0f%% of it in the kernel), %.0f commands/s, %d keys, %.0f MiB\n",
			s.addr, d.share()*100, d.sys/max(d.cpu, 1e-9)*100, float64(d.total())/d.seconds, after.keys, float64(after.memory)/(1<<20))
	}
	res.trips = float64(tripsAfter-tripsBefore) / deltas[0].seconds
	res.live = liveSum / liveN
	res.lat = g.lat.dists()
	queued := len(g.jobs)
	g.lagMu.Lock()
	lag := distOf(g.lags)
	g.lagMu.Unlock()
	res.behind = fmt.Sprintf("no (jobs late p99 %v)", lag.p99.Round(time.Millisecond))
	if lag.p99 > time.Second || queued > 100 {
		res.behind = fmt.Sprintf("yes: jobs late p99 %v, %d queued", lag.p99.Round(time.Millisecond), queued)
	}
	fmt.Printf("held %.0f calls on average; generator: %.2f CPU cores, start/end jobs late by p50 %v p99 %v max %v, %d queued at the end\n",
		res.live, genCPU.Seconds()/o.window.Seconds(), lag.p50.Round(time.Microsecond), lag.p99.Round(time.Microsecond), lag.max.Round(time.Millisecond), queued)
	fmt.Printf("renewals: %d passes, %d leases held, %d not held (calls ending between the snapshot and the script)\n",
		g.passes.Load(), g.renewed.Load(), g.lost.Load())
	ops := slices.Sorted(func(yield func(string) bool) {
		for op := range res.lat {
			if !yield(op) {
				return
			}
		}
	})
	for _, op := range ops {
		d := res.lat[op]
		fmt.Printf("  %-16s n=%-7d p50 %-9v p99 %-9v max %v\n", op, d.n, d.p50.Round(time.Microsecond), d.p99.Round(time.Microsecond), d.max.Round(time.Microsecond))
	}
	g.errs.Range(func(k, v any) bool {
		e, _ := g.firstErr.Load(k)
		fmt.Printf("  errors %s: %d (first: %v)\n", k, v.(*atomic.Int64).Load(), e)
		return true
	})
	top := topCommands(deltas)
	fmt.Printf("top commands by Redis time: %s\n", top)
	var scripts, commands int64
	for _, d := range deltas {
		for name, st := range d.commands {
			if name == "evalsha" || name == "eval" {
				scripts += st.usec
			} else {
				commands += st.usec
			}
		}
	}
	fmt.Printf("Redis time in %v: scripts (EVALSHA, what they ran included) %.1f s, every other command (those the scripts ran and the clients' own) %.1f s\n",
		o.window, float64(scripts)/1e6, float64(commands)/1e6)

	// Everything stops; each part is then costed alone.
	g.stopped.Store(true)
	stop()
	wg.Wait()
	close(workersDone)
	workers.Wait()
	res.renewed, res.notHeld = g.renewed.Load(), g.lost.Load()
	res.errors = map[string]int64{}
	g.errs.Range(func(k, v any) bool {
		res.errors[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	res.attribution = g.attribute(ctx, nodes, pods)
	fmt.Println(res.attribution)
	return res, nil
}

func (g *generator) totalTrips() int64 {
	var n int64
	for _, r := range g.replicas {
		n += r.trips.n.Load()
	}
	return n
}

// busiest is the node that ran the most commands: on a Cluster, the one
// holding edge's slot.
func busiest(ctx context.Context, nodes []*server) *server {
	best, most := nodes[0], int64(-1)
	for _, s := range nodes {
		snap, err := s.snapshot(ctx)
		if err != nil {
			continue
		}
		var n int64
		for _, st := range snap.commands {
			n += st.calls
		}
		if n > most {
			best, most = s, n
		}
	}
	return best
}

// attribute costs each part of the load alone on the node holding edge's
// keys: CPU seconds per unit, and per second at the run's rates.
func (g *generator) attribute(ctx context.Context, nodes []*server, pods []allocator.PodState) string {
	s := busiest(ctx, nodes)
	measure := func(f func()) (float64, map[string]cmdStat) {
		a, _ := s.snapshot(ctx)
		f()
		b, _ := s.snapshot(ctx)
		d := diff(a, b)
		return d.cpu, d.commands
	}
	// Redis' own cron and the INFO reads, to subtract.
	idle, _ := measure(func() { time.Sleep(2 * time.Second) })
	idleRate := idle / 2

	var out strings.Builder
	fmt.Fprintf(&out, "alone (node %s; idle %.2f%% of a core subtracted):\n", s.addr, idleRate*100)
	line := func(what string, cpu, took float64, units float64, perSecond float64, unit string) {
		cpu -= idleRate * took
		per := cpu / units
		fmt.Fprintf(&out, "  %-30s %8.1f µs CPU per %s; at this run's rate %6.2f%% of a core\n", what, per*1e6, unit, per*perSecond*100)
	}
	timed := func(f func()) (float64, float64) {
		t := time.Now()
		cpu, _ := measure(f)
		return cpu, time.Since(t).Seconds()
	}

	var leases int
	cpu, took := timed(func() {
		for _, r := range g.replicas {
			leases += len(r.leases())
			g.renewPass(ctx, r)
		}
	})
	line("renewal (batched)", cpu, took, float64(leases), float64(g.n)/g.o.renew.Seconds(), "renewed call")

	// Whole lifecycles, step by step: each step of k calls, 64 at a time,
	// costed on its own.
	k := g.o.lifecycles
	cs := make([]*call, k)
	for i := range cs {
		cs[i] = g.newCall()
	}
	perCall := float64(g.n) / g.o.duration.Seconds()
	var lifecycle float64
	for _, st := range []struct {
		name string
		f    func(*call) bool
	}{
		{"webhook nonce", g.stepNonce}, {"allocate", g.stepAllocate}, {"claim", g.stepClaim},
		{fmt.Sprintf("mark resumable (%.0f%% of calls)", g.o.resumable*100), g.stepMark},
		{"release", g.stepRelease}, {"status callback (nonce + end)", g.stepCallback},
	} {
		cpu, took := timed(func() {
			sem := make(chan struct{}, 64)
			var wg sync.WaitGroup
			for i, c := range cs {
				if c == nil {
					continue
				}
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					if !st.f(c) {
						cs[i] = nil
					}
				}()
			}
			wg.Wait()
		})
		lifecycle += cpu - idleRate*took
		line(st.name, cpu, took, float64(k), perCall, "call")
	}
	fmt.Fprintf(&out, "  %-30s %8.1f µs CPU per call; at this run's rate %6.2f%% of a core\n", "= call lifecycle", lifecycle/float64(k)*1e6, lifecycle/float64(k)*perCall*100)

	leader := g.replicas[0].a
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	cpu, took = timed(func() {
		if _, err := leader.SweepPods(ctx, "", names); err != nil {
			fmt.Fprintf(&out, "  sweep: %v\n", err)
		}
	})
	line("zombie sweep (every pod)", cpu, took, 1, 1/poolmgr.DefaultConfig().Pool.ZombieSweepInterval.Seconds(), "sweep")
	cpu, took = timed(func() {
		if _, err := leader.SyncPods(ctx, "", slices.Clone(pods)); err != nil {
			fmt.Fprintf(&out, "  sync: %v\n", err)
		}
		if _, err := leader.RegisteredPods(ctx); err != nil {
			fmt.Fprintf(&out, "  registered: %v\n", err)
		}
		if _, err := leader.Rebalance(ctx, "", 500); err != nil {
			fmt.Fprintf(&out, "  rebalance: %v\n", err)
		}
	})
	line("reconcile (sync every pod)", cpu, took, 1, 1/poolmgr.DefaultConfig().Pool.ReconcileInterval.Seconds(), "reconcile")
	const beats = 200
	cpu, took = timed(func() {
		for i := range beats {
			r := g.replicas[i%len(g.replicas)]
			r.a.Heartbeat(ctx, r.name)
		}
	})
	line("presence beat", cpu, took, beats, float64(len(g.replicas))/g.replicas[0].a.Config().HeartbeatInterval.Seconds(), "beat")
	const scrapes = 4
	cpu, took = timed(func() {
		for range scrapes {
			if _, err := g.replicas[0].a.Status(ctx); err != nil {
				fmt.Fprintf(&out, "  status: %v\n", err)
			}
		}
	})
	if g.o.scrape > 0 {
		line("pool status (scrape)", cpu, took, scrapes, float64(len(g.replicas))/g.o.scrape.Seconds(), "scrape")
	}
	return strings.TrimRight(out.String(), "\n")
}

func topCommands(ds []delta) string {
	all := map[string]cmdStat{}
	var total int64
	for _, d := range ds {
		for name, st := range d.commands {
			a := all[name]
			a.calls += st.calls
			a.usec += st.usec
			all[name] = a
			if name != "evalsha" && name != "eval" {
				total += st.usec
			}
		}
	}
	names := slices.Collect(func(yield func(string) bool) {
		for n := range all {
			if !yield(n) {
				return
			}
		}
	})
	slices.SortFunc(names, func(a, b string) int { return int(all[b].usec - all[a].usec) })
	var parts []string
	for _, n := range names[:min(10, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %d calls %.0f ms", n, all[n].calls, float64(all[n].usec)/1e3))
	}
	return strings.Join(parts, ", ")
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load average unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "load average unknown"
	}
	return "load average " + strings.Join(f[:3], " ")
}
