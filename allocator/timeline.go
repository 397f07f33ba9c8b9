package allocator

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// CallTimeline is what Redis keeps of one call, live or ended: its call
// info while it lives, its tombstone (the call info's fields, how it ended
// and the media socket's close) for the call info TTL after. It never
// holds the media claim (a socket's identity) nor any token.
type CallTimeline struct {
	CallID string `json:"call_sid"`
	// State is "live" or "ended".
	State      string `json:"state"`
	MerchantID string `json:"merchant_id,omitempty"`
	// Creator is who created the call ("provider:twilio", "token:<name>").
	Creator string `json:"creator,omitempty"`
	// Account is the provider account whose webhook created the call
	// (a label such as a Twilio AccountSid), "" for none.
	Account    string `json:"account,omitempty"`
	Pod        string `json:"pod_name,omitempty"`
	SourcePool string `json:"source_pool,omitempty"`
	PoolType   string `json:"pool_type,omitempty"`
	// MovedFrom are the pods the call left, in order: after failed
	// connects, and pods that died mid-call while it resumed elsewhere.
	MovedFrom []string `json:"moved_from,omitempty"`
	// Resumptions counts the moves of the call while its socket relayed
	// (its pod died, the caller stayed: proxy.resume), the last at
	// ResumedAt.
	Resumptions int       `json:"resumptions,omitempty"`
	ResumedAt   time.Time `json:"resumed_at,omitzero"`

	AllocatedAt    time.Time `json:"allocated_at,omitzero"`
	SocketOpenedAt time.Time `json:"socket_opened_at,omitzero"`
	SocketReplica  string    `json:"socket_replica,omitempty"`
	SocketClosedAt time.Time `json:"socket_closed_at,omitzero"`
	EndedAt        time.Time `json:"ended_at,omitzero"`

	// How the call ended: released, expired (the sweep found its lease run
	// out) or unregistered (its pod left); ReleasedBy: socket, api,
	// unanswered or provider (a status callback before the socket opened).
	How        string `json:"how,omitempty"`
	ReleasedBy string `json:"released_by,omitempty"`
	// EndedBy is who said first that the call ended, when its provider did
	// ("provider:completed", "provider:stream-error"), and ProviderEndedAt
	// when: set while the call still lives if its socket was open then.
	EndedBy         string    `json:"ended_by,omitempty"`
	ProviderEndedAt time.Time `json:"provider_ended_at,omitzero"`
	// SocketEnd is why the socket's end released the call (socket_close,
	// drain, lease_lost, pod_lost); ClosedBy and CloseCode who closed it
	// first and with which code.
	SocketEnd string `json:"socket_end,omitempty"`
	ClosedBy  string `json:"closed_by,omitempty"`
	CloseCode string `json:"close_code,omitempty"`
	// CloseReason is the reason of edge's own close frame ("pod lost:
	// hung, no_pod": how the pod was lost, and why the call did not move).
	CloseReason string `json:"close_reason,omitempty"`
	// Relayed counts, in: client to pod, out: pod to client (nil while the
	// socket is open: counted at its close, not per message).
	Relayed *Relayed `json:"relayed,omitempty"`
}

// Relayed is what a call's media socket carried.
type Relayed struct {
	MessagesIn  int64 `json:"messages_in"`
	MessagesOut int64 `json:"messages_out"`
	BytesIn     int64 `json:"bytes_in"`
	BytesOut    int64 `json:"bytes_out"`
}

// Timeline reads a call's record in one round trip: ErrCallNotFound when
// Redis keeps nothing of it (never allocated, or ended longer ago than the
// call info TTL).
func (a *Allocator) Timeline(ctx context.Context, callID string) (CallTimeline, error) {
	if err := ValidateID("call_sid", callID); err != nil {
		return CallTimeline{}, err
	}
	var live, ended *redis.MapStringStringCmd
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		live = p.HGetAll(ctx, a.keys.Call(callID))
		ended = p.HGetAll(ctx, a.keys.CallEnded(callID))
		return nil
	})
	if err != nil && !isWrongType(ended.Err()) {
		return CallTimeline{}, fmt.Errorf("read call %s: %w", callID, unavailable(err))
	}
	if h := live.Val(); h["pod_name"] != "" {
		return timelineOf(callID, "live", h), nil
	}
	if isWrongType(ended.Err()) {
		// An older edge's tombstone: how it ended, nothing more.
		how, err := a.rdb.Get(ctx, a.keys.CallEnded(callID)).Result()
		if err != nil && !isNil(err) {
			return CallTimeline{}, fmt.Errorf("read call %s: %w", callID, unavailable(err))
		}
		if how != "" {
			return CallTimeline{CallID: callID, State: "ended", How: how}, nil
		}
	}
	if h := ended.Val(); len(h) > 0 {
		return timelineOf(callID, "ended", h), nil
	}
	return CallTimeline{}, fmt.Errorf("read call %s: %w", callID, ErrCallNotFound)
}

func isWrongType(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")
}

// timelineOf reads the fields by name, so that media_claim, or any field
// added later, is never shown.
func timelineOf(callID, state string, h map[string]string) CallTimeline {
	t := CallTimeline{
		CallID: callID, State: state,
		MerchantID: h["merchant_id"], Creator: h["creator"], Account: h["account"],
		Pod: h["pod_name"], SourcePool: h["source_pool"], PoolType: h["pool_type"],
		MovedFrom:      strings.FieldsFunc(h["moved_from"], func(r rune) bool { return r == '|' }),
		AllocatedAt:    allocatedAt(h),
		SocketOpenedAt: parseMillis(h["socket_opened_at"]),
		SocketReplica:  h["socket_replica"],
		SocketClosedAt: parseMillis(h["socket_closed_at"]),
		EndedAt:        parseMillis(h["ended_at"]),
		How:            h["how"], ReleasedBy: h["released_by"],
		EndedBy: h["ended_by"], ProviderEndedAt: parseMillis(h["provider_ended_at"]),
		SocketEnd: h["socket_end"], ClosedBy: h["closed_by"], CloseCode: h["close_code"], CloseReason: h["close_reason"],
		ResumedAt: parseMillis(h["resumed_at"]),
	}
	t.Resumptions, _ = strconv.Atoi(h["resumptions"])
	if _, ok := h["bytes_in"]; ok {
		n := func(k string) int64 { v, _ := strconv.ParseInt(h[k], 10, 64); return v }
		t.Relayed = &Relayed{MessagesIn: n("messages_in"), MessagesOut: n("messages_out"),
			BytesIn: n("bytes_in"), BytesOut: n("bytes_out")}
	}
	return t
}

// PodCalls lists a pod's live calls: the call holding an exclusive pod, the
// calls with a live per-call lease on a shared one. ErrPodNotFound when the
// pod is unknown.
func (a *Allocator) PodCalls(ctx context.Context, pod string) ([]string, error) {
	info, err := a.PodInfo(ctx, pod)
	if err != nil {
		return nil, err
	}
	if len(info.Calls) > 0 {
		return info.Calls, nil
	}
	if info.CallID != "" {
		return []string{info.CallID}, nil
	}
	return []string{}, nil
}

// allocatedAt is when the call was allocated: allocated_at_ms, else the
// predecessor's allocated_at in seconds (its calls, and edge's written
// before allocated_at_ms existed).
func allocatedAt(h map[string]string) time.Time {
	if t := parseMillis(h["allocated_at_ms"]); !t.IsZero() {
		return t
	}
	return parseSeconds(h["allocated_at"])
}
