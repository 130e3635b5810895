package kubernetes

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/hemra-dev/hemra/sandbox"
)

// PodFor is podFor for the benchmark's bare pods: exactly the pod an
// instance of s starts, image given.
func (p *Provider) PodFor(s sandbox.Settings, spec sandbox.Spec, image string) *corev1.Pod {
	s.Kind = Kind
	return p.podFor(s, spec, "agent", image, true)
}

// ImageFor is imageFor: the reference the pods of s run.
var ImageFor = (*Provider).imageFor
