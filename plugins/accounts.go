package plugins

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Settings keys of a provider's credentials.
const (
	// SettingAuthTokens holds the credentials of the provider's single
	// account: comma-separated, newest first, all accepted (rotation).
	// Webhooks they verify report no account (WebhookResult.Account "").
	SettingAuthTokens = "auth_tokens"
	// AccountTokensPrefix starts the keys of several accounts'
	// credentials: "auth_tokens.<account>" holds one account's tokens
	// (comma-separated, newest first), and a webhook one of them verifies
	// reports <account>. edge sets them from
	// providers.plugins.<name>.accounts.<account>.auth_tokens, never
	// together with auth_tokens.
	AccountTokensPrefix = SettingAuthTokens + "."
)

// MaxAccountLength bounds an account's label.
const MaxAccountLength = 64

var accountLabel = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidAccount reports whether s can name an account: [A-Za-z0-9_-], 1 to
// MaxAccountLength bytes (Twilio's AccountSid, Plivo's auth id, a name).
// A label is stored with every call the account's webhooks create, and
// never holds a secret.
func ValidAccount(s string) bool { return accountLabel.MatchString(s) }

// Credential is one token (an auth token, a "user:password" pair, a
// public key) and the account it belongs to.
type Credential struct {
	// Account is the label a webhook this token verifies reports; "" for
	// the single account of auth_tokens.
	Account string
	Token   string
}

// Credentials reads a provider's credentials from s: the single account's
// auth_tokens, or each account's auth_tokens.<account>, accounts in label
// order and each account's tokens in their order. A refused setting is an
// *InvalidSetting naming its key, never a token: an account label that is
// not one (ValidAccount), an account without tokens, both forms at once,
// or one token under two accounts (a webhook it verifies would belong to
// either, which is what accounts are there to prevent).
func Credentials(s Settings) ([]Credential, error) {
	var creds []Credential
	accounts := slices.Sorted(func(yield func(string) bool) {
		for k := range maps.Keys(s) {
			if strings.HasPrefix(k, AccountTokensPrefix) && !yield(k) {
				return
			}
		}
	})
	if len(accounts) == 0 {
		for _, tok := range SplitList(s[SettingAuthTokens]) {
			creds = append(creds, Credential{Token: tok})
		}
		return creds, nil
	}
	if strings.TrimSpace(s[SettingAuthTokens]) != "" {
		return nil, &InvalidSetting{Key: SettingAuthTokens, Reason: "set either auth_tokens (one account) or each account's tokens, not both"}
	}
	owner := map[string]string{}
	for _, key := range accounts {
		account := strings.TrimPrefix(key, AccountTokensPrefix)
		if !ValidAccount(account) {
			return nil, &InvalidSetting{Key: key, Reason: fmt.Sprintf("an account is named by [A-Za-z0-9_-], 1 to %d bytes", MaxAccountLength)}
		}
		tokens := SplitList(s[key])
		if len(tokens) == 0 {
			return nil, &InvalidSetting{Key: key, Reason: "the account has no tokens"}
		}
		for _, tok := range tokens {
			if other, ok := owner[tok]; ok && other != account {
				return nil, &InvalidSetting{Key: key, Reason: fmt.Sprintf("a token of account %s is listed here too: a token may verify for one account only", other)}
			}
			owner[tok] = account
			creds = append(creds, Credential{Account: account, Token: tok})
		}
	}
	return creds, nil
}

// MatchAccount runs matches over every credential, without returning
// early (the time taken does not tell which one matched), and returns the
// account of one that matched. Credentials never share a token
// (Credentials refuses that), so at most one account can match.
func MatchAccount(creds []Credential, matches func(token string) bool) (account string, ok bool) {
	for _, c := range creds {
		if matches(c.Token) && !ok {
			account, ok = c.Account, true
		}
	}
	return account, ok
}
