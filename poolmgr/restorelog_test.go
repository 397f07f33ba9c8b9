package poolmgr

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
)

// After Redis lost its data, every replica's tier refresher finds the tier
// config missing and writes back its copy; only the first write of each
// entry lands. The replica whose writes landed WARNs that it restored, with
// how many merchant entries it wrote; a replica that wrote nothing (another
// was first) says so at INFO and never claims a restore. When the tier
// config alone is lost (its key deleted), its restore is WARNed and the
// merchant entries, all still there, are said at INFO to need nothing.
func TestRestoreLogSaysWhatWasWritten(t *testing.T) {
	_, rdb := startRedis(t)
	ctx := context.Background()
	a := allocatortest.New(t, rdb)
	k := a.Keys()
	if _, _, err := a.BootstrapTierConfig(ctx, allocatortest.Tiers()); err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, k.MerchantConfig(), "acme", `{"tier":"gold","pool":"acme"}`, "globex", `{"tier":"basic"}`)
	rdb.HSet(ctx, k.MerchantTargets(), "acme", 2)

	// refresher is one replica's, logging to its own buffer. missing makes
	// its next Load answer "missing", as it read before the other
	// replica's write landed.
	type replica struct {
		r       *TierRefresher
		log     *bytes.Buffer
		missing bool
	}
	newReplica := func() *replica {
		rp := &replica{log: &bytes.Buffer{}}
		rp.r = &TierRefresher{
			Load: func(ctx context.Context) (allocator.TierConfig, error) {
				if rp.missing {
					rp.missing = false
					return allocator.TierConfig{}, allocator.ErrTierConfigMissing
				}
				return a.LoadTierConfig(ctx)
			},
			Current:   func() allocator.TierConfig { return a.Config().Tiers },
			Apply:     func(allocator.TierConfig) {},
			Restore:   a.BootstrapTierConfig,
			Merchants: a,
			Interval:  func() time.Duration { return time.Hour },
			Log:       slog.New(slog.NewJSONHandler(rp.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Metrics:   NewMetrics(nil),
		}
		return rp
	}
	first, second := newReplica(), newReplica()
	first.r.Refresh(ctx)
	second.r.Refresh(ctx)
	first.log.Reset()
	second.log.Reset()

	rdb.FlushAll(ctx)
	first.r.Refresh(ctx)
	second.missing = true
	second.r.Refresh(ctx)

	type line struct {
		Level, Msg string
		Written    *int // absent: nil
	}
	written := func(l line) string {
		if l.Written == nil {
			return "absent"
		}
		return strconv.Itoa(*l.Written)
	}
	lines := func(b *bytes.Buffer) []line {
		var out []line
		sc := bufio.NewScanner(bytes.NewReader(b.Bytes()))
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("log line %q: %v", sc.Text(), err)
			}
			out = append(out, l)
		}
		return out
	}

	var warned []string
	for _, l := range lines(first.log) {
		if l.Level == "WARN" {
			warned = append(warned, l.Msg)
		}
		if strings.Contains(l.Msg, "merchant config") && (l.Written == nil || *l.Written != 3) {
			t.Errorf("the replica that restored logged %q with written=%s, want 3 (2 merchants, 1 target)", l.Msg, written(l))
		}
	}
	if len(warned) != 2 {
		t.Errorf("the replica that restored WARNed %q, want the tier config's and the merchant config's restore:\n%s", warned, first.log)
	}

	got := lines(second.log)
	for _, l := range got {
		if l.Level == "WARN" || l.Level == "ERROR" {
			t.Errorf("the replica that wrote nothing logged %s %q:\n%s", l.Level, l.Msg, second.log)
		}
		if strings.Contains(l.Msg, "restored this replica") {
			t.Errorf("the replica that wrote nothing claims a restore: %q", l.Msg)
		}
	}
	var said bool
	for _, l := range got {
		if l.Level == "INFO" && strings.Contains(l.Msg, "nothing written") {
			said = true
		}
	}
	if !said {
		t.Errorf("the replica that wrote nothing did not say so at INFO:\n%s", second.log)
	}
	if n := value(second.r.Metrics.TierConfigLoads.WithLabelValues("merchants_restored")); n != 0 {
		t.Errorf("the replica that wrote nothing counted merchants_restored %v, want 0", n)
	}

	// The tier config key alone goes.
	first.log.Reset()
	rdb.Del(ctx, k.TierConfig())
	first.r.Refresh(ctx)
	var tierWarned, merchantsInfo bool
	for _, l := range lines(first.log) {
		switch {
		case l.Level == "WARN" && strings.Contains(l.Msg, "tier config was missing"):
			tierWarned = true
		case strings.Contains(l.Msg, "merchant config"):
			merchantsInfo = l.Level == "INFO" && strings.Contains(l.Msg, "nothing written") && l.Written != nil && *l.Written == 0
			if !merchantsInfo {
				t.Errorf("with every merchant entry in Redis the refresher logged %s %q written=%s", l.Level, l.Msg, written(l))
			}
		}
	}
	if !tierWarned || !merchantsInfo {
		t.Errorf("tier config key deleted: want a WARN for its restore and an INFO that no merchant entry was written:\n%s", first.log)
	}
	if n := value(first.r.Metrics.TierConfigLoads.WithLabelValues("merchants_restored")); n != 1 {
		t.Errorf("merchants_restored counted %v on the replica that restored once, want 1", n)
	}
}
