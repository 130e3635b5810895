package kubernetes

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hemra-dev/hemra/sandbox"
)

// Pruned is one pod Prune removed or kept, and why.
type Pruned struct {
	Kind      string `json:"kind"` // "pod"
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Address   string `json:"address,omitempty"`
	Role      string `json:"role,omitempty"`
	Reason    string `json:"reason"`
	Error     string `json:"error,omitempty"`
}

// PruneReport lists the pods Prune removed and the ones it left alone.
type PruneReport struct {
	Removed []Pruned `json:"removed"`
	Kept    []Pruned `json:"kept,omitempty"`
}

// creatorAlive says whether the hemra that created a pod may still be
// running: it is, or it ran on another host (which cannot be checked).
func (p *Provider) creatorAlive(pod *corev1.Pod) (bool, string) {
	if id := pod.Labels[LabelHost]; id != p.hostID {
		return true, fmt.Sprintf("created by hemra on host %s, which this hemra cannot check", pod.Annotations[AnnotationHost])
	}
	pid, err := strconv.Atoi(pod.Annotations[AnnotationPID])
	if err != nil || pid <= 0 {
		return false, ""
	}
	if pid == os.Getpid() {
		return true, "created by this hemra"
	}
	if err := syscall.Kill(pid, 0); err == nil || err == syscall.EPERM {
		return true, fmt.Sprintf("its hemra (pid %d) is still running", pid)
	}
	return false, ""
}

// prune removes the pods in ns labelled with this host (and store, when
// set) whose hemra is gone.
func (c *cluster) prune(ctx context.Context, ns, store string, dryRun bool, rep *PruneReport) error {
	pods, err := c.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector(c.p.hostLabels(store))})
	if err != nil {
		return fmt.Errorf("listing pods in namespace %s: %w", ns, err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		item := Pruned{Kind: "pod", Namespace: ns, Name: pod.Name, Address: pod.Annotations[AnnotationAddress], Role: pod.Labels[LabelRole]}
		if alive, why := c.p.creatorAlive(pod); alive {
			item.Reason = why
			rep.Kept = append(rep.Kept, item)
			continue
		}
		item.Reason = "its hemra process is gone"
		if !dryRun {
			if err := c.deletePod(ctx, ns, pod.Name, 0); err != nil {
				item.Error = err.Error()
			}
		}
		rep.Removed = append(rep.Removed, item)
	}
	return nil
}

// removeLeftovers removes, once per namespace, the pods that a killed
// hemra of this host left for the provider's store: the next apply of the
// same store cleans up after the last one.
func (c *cluster) removeLeftovers(ctx context.Context, ns string) {
	if c.p.opts.Store == "" {
		return
	}
	c.mu.Lock()
	done := c.cleaned[ns]
	c.cleaned[ns] = true
	c.mu.Unlock()
	if done {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_ = c.prune(ctx, ns, c.p.opts.Store, false, &PruneReport{})
}

// Prune removes, in the namespace of each of the settings, the pods this
// host's hemra left whose process is gone: only pods labelled with this
// host, and with store's label when store is set.
func (p *Provider) Prune(ctx context.Context, settings []sandbox.Settings, store string, dryRun bool) (*PruneReport, error) {
	rep := &PruneReport{Removed: []Pruned{}}
	seen := map[string]bool{}
	for _, s := range settings {
		c, err := p.clusterFor(s)
		if err != nil {
			return rep, err
		}
		ns := c.ns(s)
		key := c.server + "\x00" + ns
		if seen[key] {
			continue
		}
		seen[key] = true
		if err := c.prune(ctx, ns, store, dryRun, rep); err != nil {
			return rep, err
		}
	}
	for _, l := range [][]Pruned{rep.Removed, rep.Kept} {
		sort.Slice(l, func(i, j int) bool { return l[i].Namespace+"/"+l[i].Name < l[j].Namespace+"/"+l[j].Name })
	}
	return rep, nil
}
