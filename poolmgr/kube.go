package poolmgr

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/edge-voice/edge/allocator"
)

// TierAnnotation pins a pod to a tier or "merchant:<id>"; without it tier
// assignment chooses.
const TierAnnotation = "edge-voice.io/tier"

// KubeSource feeds the Registry from a pod informer on one namespace and
// label selector. Every replica runs it: the proxy needs pod addresses
// whoever leads.
type KubeSource struct {
	Pods          PodClient // of Namespace (KubeAPI.Pods)
	Namespace     string
	LabelSelector string
	// Port is the pods' media port (pods.pod_port).
	Port     int
	Registry *Registry
	Log      *slog.Logger
	// Resync re-delivers every pod this often (0: never; the reconciler
	// diffs in full anyway).
	Resync time.Duration
}

// Run lists and watches pods until ctx ends.
func (s *KubeSource) Run(ctx context.Context) error {
	sel, err := labels.Parse(s.LabelSelector)
	if err != nil {
		return fmt.Errorf("pods.label_selector %q: %w", s.LabelSelector, err)
	}
	withSelector := func(o metav1.ListOptions) metav1.ListOptions {
		o.LabelSelector = sel.String()
		return o
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return s.Pods.List(ctx, withSelector(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return s.Pods.Watch(ctx, withSelector(o))
		},
	}
	// s.Pods may say it cannot stream the initial list in a watch (the fake
	// clientset does); the reflector then lists first.
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, s.Pods), &corev1.Pod{}, s.Resync, cache.Indexers{})
	// The selector is checked here too: a pod whose labels stop matching is
	// gone for edge, and client-go's fake clientset ignores selectors.
	update := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if !sel.Matches(labels.Set(pod.Labels)) {
			s.Registry.Delete(pod.Name)
			return
		}
		st := s.state(pod)
		if err := allocator.ValidateID("pod_name", st.Name); err != nil {
			s.Log.Warn("pod ignored", "pod", pod.Name, "err", err)
			return
		}
		s.Registry.Upsert(st)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    update,
		UpdateFunc: func(_, obj any) { update(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				s.Registry.Delete(pod.Name)
			}
		},
	}); err != nil {
		return err
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		inf.RunWithContext(ctx)
	}()
	defer func() { <-stopped }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil // ctx ended first
	}
	s.Registry.MarkSynced()
	s.Log.Info("pod informer synced", "namespace", s.Namespace, "selector", sel.String(), "pods", len(s.Registry.Snapshot()))
	<-ctx.Done()
	return nil
}

// state is what edge needs of a pod. Ready: phase Running, condition
// Ready=True, an IP, and not terminating (a terminating pod leaves the
// available pools at once, before its containers stop).
func (s *KubeSource) state(pod *corev1.Pod) allocator.PodState {
	st := allocator.PodState{Name: pod.Name, Tier: pod.Annotations[TierAnnotation]}
	if pod.Status.PodIP != "" {
		st.Address = net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(s.Port))
	}
	st.Ready = pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" &&
		pod.DeletionTimestamp == nil && podReady(pod)
	return st
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
