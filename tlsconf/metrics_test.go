package tlsconf

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/internal/testpki"
)

// edge_tls_reload_errors_total was born at 1 on the first failure and
// stayed 1, so increase() over it never rose and
// EdgeCertificateReloadFailing could never fire. Each pair's series is
// exported at 0 from the start.
func TestReloadErrorsExportedAtZeroFromStart(t *testing.T) {
	ca := testpki.NewCA(t)
	sec := testpki.NewSecret(t, ca.Valid(t, "edge.example.com"))
	reg := prometheus.NewRegistry()
	if _, err := New(Config{CertFile: sec.CertFile(), KeyFile: sec.KeyFile()}, "tls", time.Hour,
		slog.New(slog.NewTextHandler(io.Discard, nil)), reg); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "edge_tls_reload_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "key" && l.GetValue() == "tls" && m.GetCounter().GetValue() == 0 {
					return
				}
			}
		}
	}
	t.Fatal("edge_tls_reload_errors_total{key=\"tls\"} is not exported at 0 before any reload failed")
}
