package exotel

import (
	"fmt"
	"slices"
	"strings"

	"github.com/edge-voice/edge/plugins"
)

// Exotel's Voicebot applet streams at 8 kHz unless the stream URL asks for
// more with a query parameter (Exotel's "Working with the Stream and
// Voicebot Applet" guide, "Sample Rate": ?sample-rate=16000).
const (
	// SettingSampleRate: the sample rate every call's stream URL asks for;
	// empty asks for none (Exotel's default, 8000).
	SettingSampleRate = "sample_rate"
	// SettingSampleRateByMerchant: comma-separated merchant=rate pairs
	// that override sample_rate for the calls of those merchants (the
	// webhook's merchant_id).
	SettingSampleRateByMerchant = "sample_rate_by_merchant"
	// ParamSampleRate is the stream URL's query parameter.
	ParamSampleRate = "sample-rate"
)

// sampleRates are the rates Exotel streams at.
var sampleRates = []string{"8000", "16000", "24000"}

// mediaParams is what the plugin declares it puts on media URLs.
var mediaParams = []plugins.MediaParam{{Name: ParamSampleRate, Values: sampleRates}}

// rates is the parsed sample rate configuration.
type rates struct {
	all        string            // "" for none
	byMerchant map[string]string // merchant id -> rate
}

func parseRates(s plugins.Settings) (rates, error) {
	r := rates{all: strings.TrimSpace(s[SettingSampleRate]), byMerchant: map[string]string{}}
	if r.all != "" && !slices.Contains(sampleRates, r.all) {
		return rates{}, badRate(SettingSampleRate, r.all)
	}
	for _, item := range plugins.SplitList(s[SettingSampleRateByMerchant]) {
		merchant, rate, ok := strings.Cut(item, "=")
		merchant, rate = strings.TrimSpace(merchant), strings.TrimSpace(rate)
		switch {
		case !ok || !validMerchant(merchant):
			return rates{}, &plugins.InvalidSetting{Key: SettingSampleRateByMerchant,
				Reason: fmt.Sprintf("%q is not merchant=rate (a merchant id is [A-Za-z0-9_.-], at most 128 bytes)", item)}
		case !slices.Contains(sampleRates, rate):
			return rates{}, badRate(SettingSampleRateByMerchant, rate)
		}
		if _, dup := r.byMerchant[merchant]; dup {
			return rates{}, &plugins.InvalidSetting{Key: SettingSampleRateByMerchant, Reason: fmt.Sprintf("merchant %q is listed twice", merchant)}
		}
		r.byMerchant[merchant] = rate
	}
	return r, nil
}

func badRate(key, rate string) error {
	return &plugins.InvalidSetting{Key: key,
		Reason: fmt.Sprintf("%q is not a sample rate Exotel streams at (%s)", rate, strings.Join(sampleRates, ", "))}
}

// params are the media URL parameters of a merchant's call; nil for none.
func (r rates) params(merchant string) map[string]string {
	rate := r.all
	if m, ok := r.byMerchant[merchant]; ok {
		rate = m
	}
	if rate == "" {
		return nil
	}
	return map[string]string{ParamSampleRate: rate}
}

// validMerchant is edge's id rule ([A-Za-z0-9_.-]{1,128}): an id that
// could never arrive would be a typo.
func validMerchant(s string) bool {
	return s != "" && len(s) <= 128 && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	})
}
