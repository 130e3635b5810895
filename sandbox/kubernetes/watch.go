package kubernetes

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// podWatch is one watch of this host's pods in a namespace (an informer:
// a list, then a watch resumed from its resource version), shared by
// every instance there. Waiters are woken by the events of their pod;
// nothing polls.
type podWatch struct {
	ns       string
	informer cache.SharedIndexInformer
	stop     chan struct{}

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
}

// watch returns the namespace's pod watch, started and synced once.
func (c *cluster) watch(ns string) (*podWatch, error) {
	c.mu.Lock()
	w := c.watches[ns]
	if w == nil {
		w = c.newWatch(ns)
		c.watches[ns] = w
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced) {
		return nil, fmt.Errorf("watching pods in namespace %s: the first list did not finish", ns)
	}
	return w, nil
}

func (c *cluster) newWatch(ns string) *podWatch {
	sel := selector(c.p.hostLabels(""))
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return c.cs.CoreV1().Pods(ns).List(context.Background(), o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return c.cs.CoreV1().Pods(ns).Watch(context.Background(), o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	w := &podWatch{ns: ns, informer: inf, stop: make(chan struct{}), waiters: map[string]map[chan struct{}]struct{}{}}
	notify := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			w.notify(pod.Name)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	})
	go inf.Run(w.stop)
	return w
}

func (w *podWatch) notify(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.waiters[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// get returns the watch's latest copy of a pod, nil when it is gone.
func (w *podWatch) get(name string) *corev1.Pod {
	obj, ok, err := w.informer.GetStore().GetByKey(w.ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	return obj.(*corev1.Pod)
}

// wait returns the pod once done says so (done sees nil for a pod that is
// gone), or done's error, or ctx's.
func (w *podWatch) wait(ctx context.Context, name string, done func(*corev1.Pod) (bool, error)) (*corev1.Pod, error) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.waiters[name] == nil {
		w.waiters[name] = map[chan struct{}]struct{}{}
	}
	w.waiters[name][ch] = struct{}{}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.waiters[name], ch)
		if len(w.waiters[name]) == 0 {
			delete(w.waiters, name)
		}
		w.mu.Unlock()
	}()
	seen := false
	for {
		pod := w.get(name)
		if pod != nil {
			seen = true
		}
		// A pod not yet in the watch's copy is not gone: it was just
		// created. Only one that was seen and is no more is nil to done.
		if pod != nil || seen {
			ok, err := done(pod)
			if err != nil {
				return pod, err
			}
			if ok {
				return pod, nil
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return pod, ctx.Err()
		}
	}
}
