package poolmgr

import (
	"context"

	"github.com/edge-voice/edge/allocator"
)

// StaticSource feeds the Registry from a fixed list (the config's
// pods.static and the built-in fake agents): every listed pod is ready.
// Set replaces the list on a config reload.
type StaticSource struct {
	Registry *Registry
}

// Set replaces the list.
func (s *StaticSource) Set(pods []allocator.PodState) {
	for i := range pods {
		pods[i].Ready = true
	}
	s.Registry.Replace(pods)
	s.Registry.MarkSynced()
}

// Run blocks until ctx ends: the list only changes through Set.
func (s *StaticSource) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
