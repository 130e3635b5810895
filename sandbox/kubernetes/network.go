package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hemra-dev/hemra/sandbox"
)

// PolicyName is hemra's deny-all NetworkPolicy in each namespace it uses:
// no ingress and no egress for its pods labelled network "none".
const PolicyName = "hemra-deny-all"

const probePort = 18080

// ensurePolicy creates the deny-all policy in ns unless it is there.
func (c *cluster) ensurePolicy(ctx context.Context, ns string) error {
	c.mu.Lock()
	done := c.cleaned["policy/"+ns]
	c.mu.Unlock()
	if done {
		return nil
	}
	pol := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Labels: map[string]string{LabelManaged: "true"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelManaged: "true", LabelNetwork: "none"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	_, err := c.cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, pol, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating NetworkPolicy %s/%s: %w", ns, PolicyName, err)
	}
	c.mu.Lock()
	c.cleaned["policy/"+ns] = true
	c.mu.Unlock()
	return nil
}

// probeClient prints "open" when it connects to $1:$2, "closed" when it
// cannot, "untestable" when the image has neither nc nor bash.
const probeClient = `if command -v nc >/dev/null 2>&1; then ` +
	`if nc -w 3 "$1" "$2" </dev/null >/dev/null 2>&1; then echo open; else echo closed; fi; ` +
	`elif command -v bash >/dev/null 2>&1; then ` +
	`if timeout 3 bash -c 'exec 3<>/dev/tcp/$0/$1' "$1" "$2" 2>/dev/null; then echo open; else echo closed; fi; ` +
	`else echo untestable; fi`

// probeServer accepts connections on $1 (busybox, traditional or BSD nc).
const probeServer = `while :; do nc -l -p "$1" </dev/null >/dev/null 2>&1 || nc -l "$1" </dev/null >/dev/null 2>&1 || sleep 1; done`

// Prove implements sandbox.Prover: network_block for network "none" when
// a probe shows the cluster enforces hemra's deny-all policy, linux_vm
// when the runtime class the operator declared a VM exists. The probe
// runs once per namespace and provider.
func (p *Provider) Prove(ctx context.Context, s sandbox.Settings) sandbox.Proof {
	s.Kind = Kind
	proof := sandbox.Proof{Refused: map[sandbox.Capability]string{}}
	c, err := p.clusterFor(s)
	if err != nil {
		proof.Refused[sandbox.NetworkBlock] = err.Error()
		return proof
	}
	ns := c.ns(s)
	k := settingsOf(s)
	if k.RuntimeClass != "" {
		switch {
		case !k.RuntimeClassVM:
			proof.Refused[sandbox.LinuxVM] = fmt.Sprintf("runtime class %q is not declared a virtual machine (runtime_class_vm = true)", k.RuntimeClass)
		default:
			if _, err := c.cs.NodeV1().RuntimeClasses().Get(ctx, k.RuntimeClass, metav1.GetOptions{}); err != nil {
				proof.Refused[sandbox.LinuxVM] = fmt.Sprintf("runtime class %q: %v", k.RuntimeClass, err)
			} else {
				proof.Proven = append(proof.Proven, sandbox.LinuxVM)
			}
		}
	}
	if s.Network != "" && s.Network != "none" {
		proof.Refused[sandbox.NetworkBlock] = fmt.Sprintf("network = %q", s.Network)
		return proof
	}
	image := s.Image
	if k.ProbeImage != "" {
		image = k.ProbeImage
	}
	key := c.server + "\x00" + ns + "\x00" + image
	c.mu.Lock()
	res, ok := c.probes[key]
	c.mu.Unlock()
	if !ok {
		res = c.probe(ctx, ns, s, image)
		c.mu.Lock()
		c.probes[key] = res
		c.mu.Unlock()
	}
	if res == "" {
		proof.Proven = append(proof.Proven, sandbox.NetworkBlock)
	} else {
		proof.Refused[sandbox.NetworkBlock] = res
	}
	return proof
}

// probe returns "" when hemra's deny-all policy is shown to block a
// connection that a pod outside it makes, else why not.
func (c *cluster) probe(ctx context.Context, ns string, s sandbox.Settings, image string) string {
	if image == "" {
		return "no image to probe the network with: set probe_image (an image with sh and nc or bash) so hemra can prove the cluster enforces its deny-all NetworkPolicy"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := c.ensurePolicy(ctx, ns); err != nil {
		return err.Error()
	}
	w, err := c.watch(ns)
	if err != nil {
		return err.Error()
	}
	var made []string
	defer func() {
		rm, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, n := range made {
			_ = c.deletePod(rm, ns, n, 0)
		}
	}()
	start := func(network string, cmd []string) (string, error) {
		st := s
		st.Network = network
		st.Memory, st.CPUs, st.ReadOnly = 64<<20, 0.02, false
		pod := c.p.podFor(st, sandbox.Spec{Store: c.p.opts.Store}, "probe", image, false)
		pod.Spec.Containers[0].Command = cmd
		pod.Spec.Containers[0].WorkingDir = ""
		pod.Spec.Volumes, pod.Spec.Containers[0].VolumeMounts = nil, nil
		created, err := c.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("creating a probe pod: %w", err)
		}
		made = append(made, created.Name)
		return created.Name, nil
	}
	server, err := start("open", []string{"sh", "-c", probeServer, "hemra-probe", fmt.Sprint(probePort)})
	if err != nil {
		return err.Error()
	}
	pod, err := w.wait(ctx, server, podStarted)
	if err != nil {
		return fmt.Sprintf("the probe server pod did not start: %v", err)
	}
	ip := pod.Status.PodIP
	if ip == "" {
		pod, err = w.wait(ctx, server, func(p *corev1.Pod) (bool, error) {
			if p == nil {
				return false, errors.New("deleted")
			}
			return p.Status.PodIP != "", nil
		})
		if err != nil {
			return fmt.Sprintf("the probe server pod has no IP: %v", err)
		}
		ip = pod.Status.PodIP
	}
	client := func(network string) (string, error) {
		name, err := start(network, []string{"sh", "-c", probeClient, "hemra-probe", ip, fmt.Sprint(probePort)})
		if err != nil {
			return "", err
		}
		if _, err := w.wait(ctx, name, func(p *corev1.Pod) (bool, error) {
			if p == nil {
				return false, errors.New("deleted")
			}
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				return true, nil
			}
			for _, st := range p.Status.ContainerStatuses {
				if err := waitingProblem(st); err != nil {
					return false, err
				}
			}
			return false, nil
		}); err != nil {
			return "", err
		}
		rc, err := c.cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: containerName}).Stream(ctx)
		if err != nil {
			return "", fmt.Errorf("reading the probe's log: %w", err)
		}
		defer rc.Close()
		b, _ := io.ReadAll(io.LimitReader(rc, 4096))
		return strings.TrimSpace(string(b)), nil
	}
	control, err := client("open")
	if err != nil {
		return fmt.Sprintf("the control probe failed: %v", err)
	}
	if control != "open" {
		return fmt.Sprintf("hemra could not prove that the cluster enforces NetworkPolicy: even a probe pod outside its deny-all policy could not connect to a probe server pod (%s)", control)
	}
	blocked, err := client("none")
	if err != nil {
		return fmt.Sprintf("the probe under the deny-all policy failed: %v", err)
	}
	switch blocked {
	case "closed":
		return ""
	case "open":
		return fmt.Sprintf("the cluster does not enforce NetworkPolicy: a probe pod under hemra's deny-all policy %s/%s still connected to another pod (the cluster's network plugin ignores policies)", ns, PolicyName)
	}
	return fmt.Sprintf("the probe under the deny-all policy answered %q", blocked)
}
