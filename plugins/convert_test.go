package plugins

import (
	"testing"

	"github.com/edge-voice/edge/plugins/internal/pb"
)

// A plugin built before FailureUnavailable reads an unknown kind as
// FailureInternal: the conversion of that older build is this one's, run
// on a kind it does not know.
func TestUnknownFailureKindReadsAsInternal(t *testing.T) {
	got := answerReqFromPB(&pb.AnswerRequest{Outcome: &pb.AnswerRequest_Failure{Failure: &pb.Failure{
		Kind: pb.FailureKind(99), Reason: "redis_unavailable", Status: 503, Fallback: true,
	}}})
	if got.Failure == nil || got.Failure.Kind != FailureInternal || got.Failure.Status != 503 {
		t.Fatalf("unknown kind read as %+v, want FailureInternal with its status", got.Failure)
	}
}

func TestFailureFallbackCrossesTheWire(t *testing.T) {
	in := &AnswerRequest{Failure: &Failure{Kind: FailureUnavailable, Reason: ReasonRedisUnavailable, Message: "m", Status: 503, Fallback: true}}
	out := answerReqFromPB(answerReqToPB(in))
	if *out.Failure != *in.Failure {
		t.Fatalf("failure %+v came back as %+v", *in.Failure, *out.Failure)
	}
}
