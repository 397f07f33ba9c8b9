package nodee2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// podLogs follows the log of every container of the namespace's pods from
// its start to its exit into work/logs/pods/<pod>_<uid>.log, so that what
// a pod logged while it started and stopped outlives it: the kubelet
// removes a deleted pod's logs.
type podLogs struct {
	n      *node
	dir    string
	mu     sync.Mutex
	seen   map[string]bool
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

func (n *node) followLogs() *podLogs {
	ctx, cancel := context.WithCancel(context.Background())
	l := &podLogs{n: n, dir: n.path("logs", "pods"), seen: map[string]bool{}, cancel: cancel}
	os.MkdirAll(l.dir, 0o755)
	w, err := n.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running == nil && cs.State.Terminated == nil {
					continue
				}
				key := fmt.Sprintf("%s_%s_%s_%d", p.Name, p.UID[:8], cs.Name, cs.RestartCount)
				l.mu.Lock()
				if l.seen[key] {
					l.mu.Unlock()
					continue
				}
				l.seen[key] = true
				l.mu.Unlock()
				l.wg.Add(1)
				go l.follow(ctx, p.Name, cs.Name, key)
			}
		}
	}()
	return l
}

func (l *podLogs) follow(ctx context.Context, pod, container, key string) {
	defer l.wg.Done()
	f, err := os.Create(filepath.Join(l.dir, key+".log"))
	if err != nil {
		return
	}
	defer f.Close()
	rc, err := l.n.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(ctx)
	if err != nil {
		fmt.Fprintf(f, "node-e2e: logs of %s: %v\n", pod, err)
		return
	}
	defer rc.Close()
	io.Copy(f, rc)
}

// stop ends the streams (each ends by itself when its container exits).
func (l *podLogs) stop() {
	l.cancel()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// lines returns the followed logs' lines that contain any of words, each
// prefixed with its file's name, for pods whose name starts with prefix.
func (l *podLogs) lines(prefix string, words ...string) []string {
	files, _ := filepath.Glob(filepath.Join(l.dir, prefix+"*.log"))
	var out []string
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			for _, w := range words {
				if strings.Contains(sc.Text(), w) {
					out = append(out, strings.TrimSuffix(filepath.Base(path), ".log")+": "+sc.Text())
					break
				}
			}
		}
		f.Close()
	}
	return out
}
