package poolmgr

import (
	"maps"
	"slices"
	"sync"

	"github.com/edge-voice/edge/allocator"
)

// Registry is what the pod source says about every pod, kept on every
// replica: the media proxy resolves pod addresses here (Lookup), and the
// leader's watcher takes the pods that changed (TakeDirty). Safe for
// concurrent use.
type Registry struct {
	mu     sync.RWMutex
	pods   map[string]allocator.PodState
	dirty  map[string]bool
	synced bool

	changed    chan struct{} // capacity 1: "something is dirty"
	syncedOnce chan struct{} // closed by MarkSynced
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{
		pods:       map[string]allocator.PodState{},
		dirty:      map[string]bool{},
		changed:    make(chan struct{}, 1),
		syncedOnce: make(chan struct{}),
	}
}

// Lookup returns the "ip:port" of a pod the source knows. A pod that is not
// ready still resolves: it keeps serving the calls it has (a readiness flap
// must not cut a live media socket).
func (r *Registry) Lookup(pod string) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.pods[pod]
	if !ok || p.Address == "" {
		return "", false
	}
	return p.Address, true
}

// Get returns what the source says about one pod.
func (r *Registry) Get(pod string) (allocator.PodState, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.pods[pod]
	return p, ok
}

// Upsert records a pod's state; a change marks it dirty.
func (r *Registry) Upsert(p allocator.PodState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.pods[p.Name]; ok && old == p {
		return
	}
	r.pods[p.Name] = p
	r.markLocked(p.Name)
}

// Delete forgets a pod; it is marked dirty so the leader unregisters it.
func (r *Registry) Delete(pod string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.pods[pod]; !ok {
		return
	}
	delete(r.pods, pod)
	r.markLocked(pod)
}

// Replace sets the whole list (the static source), marking what changed.
func (r *Registry) Replace(pods []allocator.PodState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := make(map[string]allocator.PodState, len(pods))
	for _, p := range pods {
		next[p.Name] = p
		if old, ok := r.pods[p.Name]; !ok || old != p {
			r.markLocked(p.Name)
		}
	}
	for name := range r.pods {
		if _, ok := next[name]; !ok {
			r.markLocked(name)
		}
	}
	r.pods = next
}

// MarkDirty marks pods to be looked at again (a failed sync is retried).
func (r *Registry) MarkDirty(pods ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range pods {
		r.markLocked(p)
	}
}

func (r *Registry) markLocked(pod string) {
	r.dirty[pod] = true
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// Changed receives after pods were marked dirty.
func (r *Registry) Changed() <-chan struct{} { return r.changed }

// TakeDirty returns and clears the dirty pods: the present ones with their
// state, and the names of the deleted ones, each sorted.
func (r *Registry) TakeDirty() (present []allocator.PodState, deleted []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(r.dirty)) {
		if p, ok := r.pods[name]; ok {
			present = append(present, p)
		} else {
			deleted = append(deleted, name)
		}
	}
	clear(r.dirty)
	return present, deleted
}

// Snapshot returns every pod, sorted by name.
func (r *Registry) Snapshot() []allocator.PodState {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]allocator.PodState, 0, len(r.pods))
	for _, name := range slices.Sorted(maps.Keys(r.pods)) {
		out = append(out, r.pods[name])
	}
	return out
}

// MarkSynced says the source has listed every pod once. Until then the
// reconciler must not remove "ghosts": an empty registry at start would read
// as every pod deleted.
func (r *Registry) MarkSynced() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.synced {
		r.synced = true
		close(r.syncedOnce)
	}
}

// Synced is closed once the source has listed every pod.
func (r *Registry) Synced() <-chan struct{} { return r.syncedOnce }
