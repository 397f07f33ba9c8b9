package exotel_test

import (
	"context"
	"testing"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/exotel"
)

// With several accounts, the Basic credentials a webhook carries name its
// account; one account's pair is not another's.
func TestWebhookReportsTheAccountOfItsCredentials(t *testing.T) {
	ctx := context.Background()
	p := exotel.New()
	if _, err := p.Configure(ctx, plugins.Settings{
		plugins.AccountTokensPrefix + "one": "exo1:new,exo1:old", plugins.AccountTokensPrefix + "two": "exo2:pass",
	}); err != nil {
		t.Fatal(err)
	}
	for c, want := range map[string]string{"exo1:new": "one", "exo1:old": "one", "exo2:pass": "two"} {
		if res, _ := p.Webhook(ctx, post(`{"CallSid":"c1"}`, basic(c), "203.0.113.9")); res.Allocate == nil || res.Account != want {
			t.Errorf("%s: %+v, want an allocation of %s", c, res, want)
		}
	}
	if res, _ := p.Webhook(ctx, post(`{"CallSid":"c1"}`, basic("exo2:new"), "203.0.113.9")); res.Answer == nil || res.Answer.Status != 401 || res.Account != "" {
		t.Errorf("another account's user with a password of neither: %+v", res)
	}
}
