package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// imageConfig is what a Harbor task's start needs from its image.
type imageConfig struct {
	workdir     string // the image's WORKDIR, "/" when it sets none
	user        string // the image's USER ("" = root)
	healthcheck *container.HealthConfig
}

// imageConfigOf inspects an image once per provider.
func (p *Provider) imageConfigOf(ctx context.Context, ref string) (*imageConfig, error) {
	if v, ok := p.imageConfigs.Load(ref); ok {
		return v.(*imageConfig), nil
	}
	insp, err := p.cli.ImageInspect(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("inspecting image %s: %w", ref, err)
	}
	ic := &imageConfig{workdir: "/"}
	if c := insp.Config; c != nil {
		if c.WorkingDir != "" {
			ic.workdir = c.WorkingDir
		}
		ic.user = c.User
		if hc := c.Healthcheck; hc != nil && len(hc.Test) > 0 && hc.Test[0] != "NONE" {
			ic.healthcheck = hc
		}
	}
	p.imageConfigs.Store(ref, ic)
	return ic, nil
}

// Docker's HEALTHCHECK defaults, for the wait's bound.
const (
	defaultHealthInterval = 30 * time.Second
	defaultHealthTimeout  = 30 * time.Second
	defaultHealthRetries  = 3
	// maxHealthWait bounds the wait for an image's HEALTHCHECK whatever it
	// declares (Harbor bounds the whole start by the build timeout, 600 s).
	maxHealthWait = 10 * time.Minute
)

// awaitStarted waits, as `docker compose up --wait` does for Harbor,
// until an image's HEALTHCHECK reports healthy, and says so when the
// container stops first.
func (in *instance) awaitStarted(ctx context.Context) error {
	hc := in.image.healthcheck
	if hc == nil {
		// Nothing to wait for: an entrypoint that ended is noticed by the
		// first command (sandbox.ErrStopped), without an inspect here.
		return nil
	}
	wait := time.Duration(0)
	if hc != nil {
		interval, timeout, retries := hc.Interval, hc.Timeout, hc.Retries
		if interval <= 0 {
			interval = defaultHealthInterval
		}
		if timeout <= 0 {
			timeout = defaultHealthTimeout
		}
		if retries <= 0 {
			retries = defaultHealthRetries
		}
		wait = min(hc.StartPeriod+time.Duration(retries+1)*(interval+timeout), maxHealthWait)
	}
	deadline := time.Now().Add(wait)
	for delay := 20 * time.Millisecond; ; delay = min(delay*2, time.Second) {
		insp, err := in.p.cli.ContainerInspect(ctx, in.id)
		if err != nil {
			return fmt.Errorf("starting the container: %w", err)
		}
		st := insp.State
		if st == nil || !st.Running {
			code := 0
			if st != nil {
				code = st.ExitCode
			}
			return fmt.Errorf("the container stopped right after it started (exit code %d): its ENTRYPOINT must keep running the command it is given (Harbor starts it with sh -c \"sleep infinity\")%s", code, in.logTail(ctx))
		}
		if hc == nil || st.Health == nil {
			return nil
		}
		switch st.Health.Status {
		case container.Healthy:
			return nil
		case container.Unhealthy:
			return fmt.Errorf("the image's HEALTHCHECK reports the container unhealthy%s", healthLog(st.Health))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the image's HEALTHCHECK did not report healthy within %s%s", wait.Round(time.Second), healthLog(st.Health))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

func healthLog(h *container.Health) string {
	if h == nil || len(h.Log) == 0 {
		return ""
	}
	last := h.Log[len(h.Log)-1]
	return fmt.Sprintf(" (last check exited %d: %s)", last.ExitCode, strings.TrimSpace(last.Output))
}

// logTail is the end of a stopped container's output, for an error.
func (in *instance) logTail(ctx context.Context) string {
	rc, err := in.p.cli.ContainerLogs(ctx, in.id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 16<<10))
	s := strings.TrimSpace(out.String())
	if s == "" {
		return ""
	}
	return "; its output ended with:\n" + s
}
