package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Redis that accepts and never answers (stalled, SIGSTOP) makes
// /api/v1/status answer 503 with status "down".
func TestStatusAnswers503OnARedisStall(t *testing.T) {
	e := newEnv(t)
	e.surface.RequestTimeout = func() time.Duration { return 200 * time.Millisecond }
	e.srv.Pause()
	t.Cleanup(e.srv.Resume)
	assertStatusDown(t, e)
}

// A Redis stalled by a long script answers every other command BUSY
// (past busy-reply-threshold): status answered 500, as if edge had a bug.
// Redis is unavailable for the while, and the answer is 503, "down".
func TestStatusAnswers503WhileRedisIsBusy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.rdb.ConfigSet(ctx, "busy-reply-threshold", "50").Err(); err != nil {
		t.Fatal(err)
	}
	// A script that runs until it is killed, on a connection of its own.
	busy := redis.NewClient(e.srv.Options())
	defer busy.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		busy.Eval(ctx, "while true do end", nil)
	}()
	t.Cleanup(func() {
		for {
			err := e.rdb.ScriptKill(ctx).Err()
			if err == nil || err.Error() == "NOTBUSY No scripts in execution right now." {
				break
			}
		}
		<-done
	})
	// BUSY once the threshold passed: wait for the first one.
	for {
		err := e.rdb.Ping(ctx).Err()
		if err != nil && redis.HasErrorPrefix(err, "BUSY") {
			break
		}
	}
	assertStatusDown(t, e)
}

func assertStatusDown(t *testing.T, e *env) {
	t.Helper()
	resp, err := http.Get(e.admin.URL + "/api/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusServiceUnavailable || body["status"] != "down" {
		t.Fatalf("status: %d %v, want 503 and status down", resp.StatusCode, body)
	}
}
