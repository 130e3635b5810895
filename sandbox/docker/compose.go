package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"

	"github.com/hemra-dev/hemra/sandbox"
)

// RoleService labels the containers of a compose environment's services
// other than main.
const RoleService = "service"

// composeEnv is a compose environment's objects beside its main
// container: a private network, the other services' containers and the
// named volumes, all labelled as the instance's and removed with it.
type composeEnv struct {
	network  string // its id
	services []string
	volumes  map[string]string // compose name → volume name
	// byName maps a service to its container, for depends_on.
	byName map[string]string
}

// startCompose creates an instance's compose environment up to main: the
// network (internal, with no route out, unless the settings open the
// network), the named volumes, and every service main depends on (and
// theirs), each started once what it depends on is started, healthy or
// completed. It fills the main container's network and mounts.
func (in *instance) startCompose(ctx context.Context, c *sandbox.Compose) error {
	p := in.p
	ce := &composeEnv{volumes: map[string]string{}, byName: map[string]string{}}
	in.compose = ce
	lbl := maps.Clone(in.labels)
	lbl[LabelRole] = "network"
	name := "hemra-" + shortID(in.labels[LabelAttempt]) + "-" + randomSuffix()
	net, err := p.cli.NetworkCreate(ctx, name, network.CreateOptions{
		Driver: "bridge", Internal: networkMode(in.settings.Network) == "none", Labels: lbl,
	})
	if err != nil {
		return fmt.Errorf("creating the compose network: %w", err)
	}
	ce.network = net.ID
	for _, v := range c.Volumes {
		vl := maps.Clone(in.labels)
		vl[LabelRole] = "volume"
		vol, err := p.cli.VolumeCreate(ctx, volume.CreateOptions{Name: name + "-" + v, Labels: vl})
		if err != nil {
			return fmt.Errorf("creating volume %s: %w", v, err)
		}
		ce.volumes[v] = vol.Name
	}
	started := map[string]bool{}
	for _, s := range c.Services {
		if err := in.startService(ctx, c, s, started); err != nil {
			if ctx.Err() != nil {
				return err
			}
			// A service that does not build, start, or become healthy is
			// the task's (deterministic) error.
			return &sandbox.BuildError{Err: fmt.Errorf("compose service %s: %w", s.Name, err)}
		}
	}
	// main joins the network as "main", with its compose mounts.
	in.hc.NetworkMode = container.NetworkMode(net.ID)
	in.netcfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		net.ID: {Aliases: []string{"main"}},
	}}
	mounts, tmpfs := ce.mounts(c.Main)
	in.hc.Mounts = append(in.hc.Mounts, mounts...)
	for _, t := range tmpfs {
		if in.hc.Tmpfs == nil {
			in.hc.Tmpfs = map[string]string{}
		}
		in.hc.Tmpfs[t] = "rw,nosuid,nodev"
	}
	if err := in.awaitDependencies(ctx, c.Main); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return &sandbox.BuildError{Err: fmt.Errorf("compose service main: %w", err)}
	}
	return nil
}

// startService creates and starts one service (not main) with the
// instance's hardening and limits, after what it depends on.
func (in *instance) startService(ctx context.Context, c *sandbox.Compose, s sandbox.ComposeService, started map[string]bool) error {
	p, ce := in.p, in.compose
	if err := in.awaitDependencies(ctx, s); err != nil {
		return err
	}
	img := s.Image
	if s.Build != nil {
		id, err := p.EnsureTaskImage(ctx, s.Build)
		if err != nil {
			return err
		}
		img = id
	} else {
		var err error
		if img, err = p.ensureImage(ctx, s.Image); err != nil {
			return err
		}
	}
	lbl := maps.Clone(in.labels)
	lbl[LabelRole] = RoleService
	lbl[LabelService] = s.Name
	cfg := &container.Config{
		Image: img, Labels: lbl, User: s.User, WorkingDir: s.WorkingDir, Hostname: s.Hostname,
		Env: envList(s.Env),
	}
	if s.Entrypoint != nil {
		cfg.Entrypoint = s.Entrypoint
	}
	if s.Command != nil {
		cfg.Cmd = s.Command
	}
	if h := s.Health; h != nil {
		cfg.Healthcheck = &container.HealthConfig{Test: h.Test, Interval: h.Interval, Timeout: h.Timeout, StartPeriod: h.StartPeriod, StartInterval: h.StartInterval, Retries: h.Retries}
		if h.Disable {
			cfg.Healthcheck = &container.HealthConfig{Test: []string{"NONE"}}
		}
	}
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(ce.network),
		CapDrop:        in.hc.CapDrop,
		SecurityOpt:    in.hc.SecurityOpt,
		ReadonlyRootfs: s.ReadOnly,
		Init:           in.hc.Init,
		Resources:      in.hc.Resources,
	}
	narrowLimits(hc, s)
	mounts, tmpfs := ce.mounts(s)
	hc.Mounts = mounts
	for _, t := range tmpfs {
		if hc.Tmpfs == nil {
			hc.Tmpfs = map[string]string{}
		}
		hc.Tmpfs[t] = "rw,nosuid,nodev"
	}
	aliases := []string{s.Name}
	if s.Hostname != "" && s.Hostname != s.Name {
		aliases = append(aliases, s.Hostname)
	}
	created, err := p.cli.ContainerCreate(ctx, cfg, hc, &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		ce.network: {Aliases: aliases},
	}}, nil, "")
	if err != nil {
		return fmt.Errorf("creating its container: %w", err)
	}
	ce.services = append(ce.services, created.ID)
	ce.byName[s.Name] = created.ID
	if err := p.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return fmt.Errorf("starting it: %w", err)
	}
	started[s.Name] = true
	return nil
}

// narrowLimits lowers a service's limits to what the compose file gives
// it (never above the sandbox's).
func narrowLimits(hc *container.HostConfig, s sandbox.ComposeService) {
	if s.CPUs > 0 {
		n := int64(s.CPUs * 1e9)
		if hc.NanoCPUs == 0 || n < hc.NanoCPUs {
			hc.NanoCPUs = n
		}
	}
	if s.Memory > 0 && (hc.Memory == 0 || s.Memory < hc.Memory) {
		hc.Memory, hc.MemorySwap = s.Memory, s.Memory
	}
}

// mounts are a service's volumes: the instance's named volumes, and
// read-only binds of the task's files.
func (ce *composeEnv) mounts(s sandbox.ComposeService) ([]mount.Mount, []string) {
	var out []mount.Mount
	for _, v := range s.Volumes {
		switch v.Type {
		case "volume":
			out = append(out, mount.Mount{Type: mount.TypeVolume, Source: ce.volumes[v.Source], Target: v.Target, ReadOnly: v.ReadOnly})
		case "bind":
			out = append(out, mount.Mount{Type: mount.TypeBind, Source: v.Source, Target: v.Target, ReadOnly: true})
		}
	}
	return out, s.Tmpfs
}

// awaitDependencies waits until every service s depends on meets its
// condition: started, healthy (its healthcheck), or completed with exit
// code 0 — as `docker compose up --wait` orders them for Harbor.
func (in *instance) awaitDependencies(ctx context.Context, s sandbox.ComposeService) error {
	for _, d := range s.DependsOn {
		id := in.compose.byName[d.Service]
		if id == "" {
			return fmt.Errorf("depends on %s, which has not started", d.Service)
		}
		switch d.Condition {
		case "service_healthy":
			if err := in.awaitHealthy(ctx, d.Service, id); err != nil {
				return err
			}
		case "service_completed_successfully":
			waitC, errC := in.p.cli.ContainerWait(ctx, id, container.WaitConditionNotRunning)
			select {
			case r := <-waitC:
				if r.StatusCode != 0 {
					return fmt.Errorf("%s exited %d; it must complete successfully first", d.Service, r.StatusCode)
				}
			case err := <-errC:
				return fmt.Errorf("waiting for %s: %w", d.Service, err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

func (in *instance) awaitHealthy(ctx context.Context, name, id string) error {
	deadline := time.Now().Add(maxHealthWait)
	for delay := 50 * time.Millisecond; ; delay = min(delay*2, time.Second) {
		insp, err := in.p.cli.ContainerInspect(ctx, id)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", name, err)
		}
		st := insp.State
		switch {
		case st == nil:
		case !st.Running:
			return fmt.Errorf("%s stopped (exit code %d) before it was healthy", name, st.ExitCode)
		case st.Health == nil:
			return fmt.Errorf("%s has no healthcheck, which depends_on condition service_healthy needs", name)
		case st.Health.Status == container.Healthy:
			return nil
		case st.Health.Status == container.Unhealthy:
			return fmt.Errorf("%s is unhealthy%s", name, healthLog(st.Health))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s was not healthy within %s", name, maxHealthWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// joinPeers puts an instance on the compose network of another (a
// snapshot verifier beside the agent's services).
func (in *instance) joinPeers(peer sandbox.Instance) error {
	pi, ok := peer.(*instance)
	if !ok || pi.compose == nil {
		return nil
	}
	in.hc.NetworkMode = container.NetworkMode(pi.compose.network)
	in.netcfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{pi.compose.network: {}}}
	return nil
}

// stopCompose removes the services, the volumes and the network.
func (in *instance) stopCompose(ctx context.Context) error {
	ce := in.compose
	if ce == nil {
		return nil
	}
	var errs []error
	for _, id := range slices.Backward(ce.services) {
		if err := in.p.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isGone(err) {
			errs = append(errs, err)
		}
	}
	names := make([]string, 0, len(ce.volumes))
	for _, v := range ce.volumes {
		names = append(names, v)
	}
	sort.Strings(names)
	for _, v := range names {
		if err := in.p.cli.VolumeRemove(ctx, v, true); err != nil && !isGone(err) {
			errs = append(errs, err)
		}
	}
	if ce.network != "" {
		if err := in.p.cli.NetworkRemove(ctx, ce.network); err != nil && !isGone(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing the compose environment: %w", errors.Join(errs...))
	}
	return nil
}

func isGone(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "No such") || strings.Contains(err.Error(), "not found"))
}

func envList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[len(id)-12:]
	}
	return id
}

// randomSuffix keeps two instances of one attempt (agent and verifier)
// apart in the engine's names.
func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
