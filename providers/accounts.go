package providers

import (
	"net/http"

	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/plugins"
)

// Outcomes of webhooks refused for their account
// (edge_provider_webhooks_total).
const (
	// outcomeOtherAccount: a status callback or a repeat of a call that
	// another account of the provider created (403, nothing changed).
	outcomeOtherAccount = "other_account"
	// outcomeUnknownAccount: the provider has accounts, and the plugin
	// reported none of them for a webhook it verified (a plugin built
	// before WebhookResult.Account, or settings not yet applied).
	outcomeUnknownAccount = "unknown_account"
	// outcomeMerchantNotAllowed: the account is bound to merchants, and
	// the webhook asked for another.
	outcomeMerchantNotAllowed = "merchant_not_allowed"
)

// knownAccount refuses a verified webhook that would act on a call
// (allocate it, end it) when the provider has accounts and the plugin
// reported none of them: without its account a call could not be kept
// from the provider's other accounts, nor an account to its merchants. A
// plugin given accounts that does not report them (one built before
// WebhookResult.Account) is refused rather than trusted as one account.
func (h *Host) knownAccount(w http.ResponseWriter, p *proc, res *plugins.WebhookResult) (outcome string, ok bool) {
	accounts := h.opts.Current().Plugins[p.name].Accounts
	if len(accounts) == 0 {
		return "", true
	}
	if _, ok := accounts[res.Account]; ok {
		return "", true
	}
	p.log.Error("webhook refused: the provider has accounts, and its plugin reported none of them for it (a plugin that predates accounts, or settings not yet applied)",
		"account", res.Account)
	writeJSON(w, http.StatusForbidden, outcomeUnknownAccount, "the request's account is not known")
	return outcomeUnknownAccount, false
}

// merchantAllowed refuses, in the provider's failure markup, an
// allocation for a merchant the webhook's account may not allocate for
// (providers.plugins.<name>.accounts.<account>.merchants: its own, or
// another account's).
func (h *Host) merchantAllowed(w http.ResponseWriter, r *http.Request, p *proc, l *live, account string, ar plugins.AllocationRequest) (string, bool) {
	accounts := h.opts.Current().Plugins[p.name].Accounts
	if _, ok := accounts[account]; !ok || merchantAllowed(accounts, account, ar.MerchantID) {
		return "", true
	}
	p.log.Warn("webhook refused: its account may not allocate for the merchant", "account", account,
		"merchant_id", ar.MerchantID, "call_sid", ar.CallID)
	f := calls.Failure{Kind: calls.KindForbidden, Status: http.StatusForbidden, Code: outcomeMerchantNotAllowed,
		Message: "this account may not place calls for this merchant"}
	fail := &plugins.Failure{Kind: plugins.FailureInvalidRequest, Reason: f.Code, Message: f.Message, Status: f.Status}
	return h.answerFailure(w, r, p, l, ar, f, fail, outcomeMerchantNotAllowed), false
}

// otherAccount answers a webhook about a call of another account of the
// provider as a forged one is answered: 403, no pod, no media URL, and the
// call unchanged.
func otherAccount(w http.ResponseWriter, p *proc, callID, account, what string) string {
	p.log.Warn(what+" refused: the call belongs to another account of the provider", "call_sid", callID, "account", account)
	writeJSON(w, http.StatusForbidden, outcomeOtherAccount, "the call belongs to another account")
	return outcomeOtherAccount
}
