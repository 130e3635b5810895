package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/hemra-dev/hemra/sandbox"
)

// Kind is the provider's sandbox kind.
const Kind = "local"

// Folder names inside an attempt's workspace (the local-sandbox folder
// contract shared with the executor and the example tasks).
const (
	AppDir          = "app"
	AgentLogsDir    = "logs/agent"
	VerifierLogsDir = "logs/verifier"
	TestsDir        = "tests"
	SolutionDir     = "solution"
	ArtifactsDir    = "artifacts"
	SnapshotDir     = "snapshot"
)

// Environment variables that tell a command where the workspace folders
// are. Docker sets the same names to the Harbor paths, so one task script
// works in both.
const (
	EnvWorkdir      = "HEMRA_WORKDIR"
	EnvAgentLogs    = "HEMRA_AGENT_LOGS"
	EnvVerifierLogs = "HEMRA_VERIFIER_LOGS"
	EnvTestsDir     = "HEMRA_TESTS_DIR"
	EnvSolutionDir  = "HEMRA_SOLUTION_DIR"
	EnvArtifactsDir = "HEMRA_ARTIFACTS_DIR"
)

// DefaultLinger is how long a command's stdout and stderr may stay quiet
// after its process group is gone before they are closed: only a process
// that left the group (setsid) can still hold them open by then.
const DefaultLinger = 2 * time.Second

// maxLinger bounds the wait for a stream that keeps producing output after
// its process group is gone.
const maxLinger = 30 * time.Second

// Options configure the provider.
type Options struct {
	// Path is the PATH commands get unless Spec.Env or ExecRequest.Env
	// sets one. New takes it from hemra's own environment.
	Path string
	// Linger: see DefaultLinger. Zero takes the default.
	Linger time.Duration
}

// Provider runs commands as host processes.
type Provider struct {
	opts Options
}

// New returns the local provider, with PATH taken from hemra's
// environment (the one variable the cleared environment keeps).
func New() sandbox.Provider {
	return NewWithOptions(Options{Path: os.Getenv("PATH")})
}

// NewWithOptions returns the local provider with explicit options.
func NewWithOptions(opts Options) *Provider {
	if opts.Linger <= 0 {
		opts.Linger = DefaultLinger
	}
	return &Provider{opts: opts}
}

// Kind returns "local".
func (p *Provider) Kind() string { return Kind }

// Available reports whether process groups work here (any Unix).
func (p *Provider) Available(ctx context.Context) (bool, string) {
	if !supported {
		return false, "the local sandbox needs process groups (Linux, macOS or another Unix); this is " + runtime.GOOS
	}
	return true, "host processes on " + runtime.GOOS + "/" + runtime.GOARCH + " (no isolation)"
}

// Capabilities returns none: a local process shares the operator's
// network, files and resources.
func (p *Provider) Capabilities(s sandbox.Settings) []sandbox.Capability {
	return sandbox.CapabilitiesFor(withKind(s))
}

func withKind(s sandbox.Settings) sandbox.Settings {
	s.Kind = Kind
	return s
}

// Validate refuses every setting a host process cannot be held to, one
// error per setting. Settings.Workdir is ignored: commands always start in
// the workspace's app/ folder.
func (p *Provider) Validate(s sandbox.Settings) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Kind != "" && s.Kind != Kind {
		add("the local sandbox cannot start a sandbox of kind %q", s.Kind)
	}
	if s.Image != "" {
		add("the local sandbox cannot run image %s: it runs processes on this host; use kind = \"docker\"", s.Image)
	}
	if s.Build != nil {
		add("the local sandbox cannot build a task image: it runs processes on this host; use kind = \"docker\"")
	}
	switch s.Network {
	case "", "open":
	default:
		add("the local sandbox cannot enforce network = %q: a local process has the host's network", s.Network)
	}
	if len(s.Egress) > 0 {
		add("the local sandbox cannot enforce an egress allowlist: a local process has the host's network")
	}
	if s.Memory > 0 {
		add("the local sandbox cannot enforce a memory limit")
	}
	if s.CPUs > 0 {
		add("the local sandbox cannot enforce a CPU limit")
	}
	if s.Pids > 0 {
		add("the local sandbox cannot enforce a process limit")
	}
	if s.ReadOnly {
		add("the local sandbox cannot enforce read_only: a local process can write wherever the operator can")
	}
	if s.User != "" {
		add("the local sandbox cannot run as user %q: it runs as the operator", s.User)
	}
	for _, m := range s.Mounts {
		add("the local sandbox cannot mount %s at %s: a local process sees the host's files as they are", m.Source, m.Target)
	}
	return errors.Join(errs...)
}

// Start creates the workspace folders (app/, logs/agent/, logs/verifier/,
// artifacts/) under spec.Workspace and, when spec.Snapshot is set,
// restores a snapshot into them. tests/ and solution/ are created only by
// the uploads that fill them.
// RemoveSnapshot removes a snapshot folder an instance's Snapshot made (a
// workspace's snapshot/), once the executor no longer needs it: the
// attempt it belongs to was superseded. Anything else is refused.
func (p *Provider) RemoveSnapshot(_ context.Context, ref string) error {
	if ref == EmptySnapshot {
		return nil // no folder
	}
	ref = filepath.Clean(ref)
	if !filepath.IsAbs(ref) || filepath.Base(ref) != SnapshotDir {
		return fmt.Errorf("local sandbox: %s is not a snapshot folder", ref)
	}
	if err := os.RemoveAll(ref); err != nil {
		return fmt.Errorf("local sandbox: removing snapshot %s: %w", ref, err)
	}
	// Its workspace goes too when nothing else is left in it (the work
	// folder of a recorded attempt holds only its snapshot).
	_ = os.Remove(filepath.Dir(ref))
	return nil
}

func (p *Provider) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Instance, error) {
	if !supported {
		return nil, errors.New("the local sandbox is not supported on " + runtime.GOOS)
	}
	if err := p.Validate(spec.Settings); err != nil {
		return nil, err
	}
	if spec.Workspace == "" {
		return nil, errors.New("local sandbox: no workspace folder given")
	}
	if len(spec.Mounts) > 0 {
		// A process on this host sees host paths as they are: nothing to bind.
		return nil, fmt.Errorf("local sandbox: cannot bind %s into a process on this host; pass its host path instead", spec.Mounts[0].Target)
	}
	ws, err := filepath.Abs(spec.Workspace)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(ws, 0o700); err != nil {
		return nil, fmt.Errorf("local sandbox: creating the workspace: %w", err)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return nil, fmt.Errorf("local sandbox: %w", err)
	}
	in := &instance{p: p, spec: spec, ws: ws, root: root, procs: map[*process]struct{}{}}
	for _, d := range []string{AppDir, AgentLogsDir, VerifierLogsDir, ArtifactsDir} {
		if err := ensureDir(root, d); err != nil {
			root.Close()
			return nil, fmt.Errorf("local sandbox: creating %s: %w", filepath.Join(ws, d), err)
		}
	}
	if spec.Snapshot != "" {
		if err := in.restore(spec.Snapshot); err != nil {
			root.Close()
			return nil, fmt.Errorf("local sandbox: restoring snapshot %s: %w", spec.Snapshot, err)
		}
	}
	return in, nil
}

// environ builds a command's environment from nothing: PATH, the spec's
// and the request's variables, and the workspace folder variables (which
// nothing overrides).
func (in *instance) environ(req map[string]string) []string {
	env := map[string]string{"PATH": in.p.opts.Path}
	for k, v := range in.spec.Env {
		env[k] = v
	}
	for k, v := range req {
		env[k] = v
	}
	paths := in.Paths()
	env[EnvWorkdir] = paths.Workdir
	env[EnvAgentLogs] = paths.AgentLogs
	env[EnvVerifierLogs] = paths.VerifierLogs
	env[EnvTestsDir] = paths.Tests
	env[EnvSolutionDir] = paths.Solution
	env[EnvArtifactsDir] = paths.Artifacts
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// lookPath finds name in the command's PATH (not hemra's), or resolves a
// relative path against the command's directory.
func lookPath(name, pathEnv, dir string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		if err := executable(name); err != nil {
			return "", err
		}
		return name, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" || !filepath.IsAbs(d) {
			continue // never the working directory
		}
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH", name)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s: not an executable file", p)
	}
	return nil
}
