package api

import (
	"net/http/httptest"
	"testing"
)

// The release answer was a map; it is a struct now (fewer allocations
// per release). Clients must see the same bytes.
func TestReleaseResponseEncodesAsTheMapDid(t *testing.T) {
	stale := "the call's lease had expired and its pod was already recovered; nothing returned to the pool"
	cases := map[string]struct {
		resp releaseResponse
		old  map[string]any
	}{
		"returned": {
			releaseResponse{Success: true, PodName: "agent-0", ReleasedToPool: "pool:gold", ReturnedToPool: true},
			map[string]any{"success": true, "pod_name": "agent-0", "released_to_pool": "pool:gold", "returned_to_pool": true, "was_draining": false},
		},
		"draining": {
			releaseResponse{Success: true, PodName: "agent-1", WasDraining: true},
			map[string]any{"success": true, "pod_name": "agent-1", "released_to_pool": "", "returned_to_pool": false, "was_draining": true},
		},
		"stale": {
			releaseResponse{Success: true, PodName: "agent-2", Stale: true, Message: stale},
			map[string]any{"success": true, "pod_name": "agent-2", "released_to_pool": "", "returned_to_pool": false, "was_draining": false, "stale": true, "message": stale},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, want := httptest.NewRecorder(), httptest.NewRecorder()
			writeJSON(got, 200, c.resp)
			writeJSON(want, 200, c.old)
			if got.Body.String() != want.Body.String() {
				t.Errorf("struct encodes\n%s\nthe map encoded\n%s", got.Body, want.Body)
			}
		})
	}
}

// BenchmarkReleaseAnswer compares the release answer's encoding as the
// struct and as the map it was (go test -bench ReleaseAnswer -benchmem).
func BenchmarkReleaseAnswer(b *testing.B) {
	b.Run("struct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeJSON(httptest.NewRecorder(), 200, releaseResponse{Success: true, PodName: "agent-0", ReleasedToPool: "pool:gold", ReturnedToPool: true})
		}
	})
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeJSON(httptest.NewRecorder(), 200, map[string]any{"success": true, "pod_name": "agent-0", "released_to_pool": "pool:gold", "returned_to_pool": true, "was_draining": false})
		}
	})
}
