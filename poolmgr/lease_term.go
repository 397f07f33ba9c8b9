package poolmgr

import (
	"context"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/edge-voice/edge/allocator"
)

// termRecorder wraps the Leases client that client-go's LeaseLock writes
// through, and keeps the term of the last Lease this replica wrote as its
// holder: the object's creationTimestamp and UID (which only the API
// server's reply carries) and its leaseTransitions. client-go's own lock is
// not safe to read beside its renew loop, and a Get after winning could
// already see a successor's record.
type termRecorder struct {
	coordinationv1client.LeasesGetter
	identity string
	last     atomic.Pointer[allocator.LeaseTerm]
}

func (r *termRecorder) Leases(namespace string) coordinationv1client.LeaseInterface {
	return recordingLeases{LeaseInterface: r.LeasesGetter.Leases(namespace), r: r}
}

// term is the last recorded term; the zero term when none was written.
func (r *termRecorder) term() allocator.LeaseTerm {
	if t := r.last.Load(); t != nil {
		return *t
	}
	return allocator.LeaseTerm{}
}

func (r *termRecorder) record(l *coordinationv1.Lease, err error) {
	if err != nil || l == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != r.identity {
		return
	}
	t := allocator.LeaseTerm{Created: l.CreationTimestamp.Unix(), UID: string(l.UID)}
	if l.Spec.LeaseTransitions != nil {
		t.Transitions = int64(*l.Spec.LeaseTransitions)
	}
	if l.CreationTimestamp.IsZero() {
		t.Created = 0 // Unix() of the zero time is negative
	}
	r.last.Store(&t)
}

type recordingLeases struct {
	coordinationv1client.LeaseInterface
	r *termRecorder
}

func (l recordingLeases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out, err := l.LeaseInterface.Create(ctx, lease, opts)
	l.r.record(out, err)
	return out, err
}

func (l recordingLeases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out, err := l.LeaseInterface.Update(ctx, lease, opts)
	l.r.record(out, err)
	return out, err
}
