package sandboxbin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Platform is a GOOS/GOARCH pair, written "linux/amd64".
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Linux is what a container on a local engine runs: linux on this
// machine's architecture.
func Linux() Platform { return Platform{"linux", runtime.GOARCH} }

// Host is this machine's own platform (the local sandbox).
func Host() Platform { return Platform{runtime.GOOS, runtime.GOARCH} }

// ParsePlatform reads "os/arch".
func ParsePlatform(s string) (Platform, error) {
	o, a, ok := strings.Cut(s, "/")
	if !ok || o == "" || a == "" || strings.Contains(a, "/") {
		return Platform{}, fmt.Errorf("%q is not a platform like linux/amd64", s)
	}
	return Platform{o, a}, nil
}

// Origin says where a binary came from.
type Origin string

const (
	OriginPrebuilt Origin = "prebuilt" // embedded by `make build`, written to the cache
	OriginCache    Origin = "cache"    // found in the cache, from an earlier build or extraction
	OriginBuilt    Origin = "built"    // compiled now from the embedded sources
)

// Binary is one program ready on the host: a static executable file to
// bind read-only into a sandbox or to copy into an image.
type Binary struct {
	Name     string
	Platform Platform
	// Path is the file on the host, mode 0555, in the cache. Callers never
	// write to it.
	Path string
	// SHA256 is "sha256:<hex>" of the file: for content-addressed image
	// tags. It depends on the toolchain that built it.
	SHA256 string
	// SourceHash is the program's SourceHash: for fingerprints.
	SourceHash string
	Origin     Origin
}

// Locator finds or builds binaries. The zero value is not ready; use New.
type Locator struct {
	// CacheDir holds built binaries as <source hash>/<os>-<arch>/<name>.
	CacheDir string
	// Go is the go command that builds missing binaries ("" = none: a
	// missing binary is an error saying how to get one).
	Go string
	// Environ is the environment go build runs in (its GOCACHE, GOPATH,
	// HOME, GOTOOLCHAIN); GOOS, GOARCH, CGO_ENABLED, GOFLAGS and GOWORK are
	// always set by the locator.
	Environ []string
	// NoPrebuilt ignores binaries embedded by `make build` (tests of the
	// build path, and the prebuild program itself).
	NoPrebuilt bool

	mu    sync.Mutex
	keyMu map[string]*sync.Mutex
	found map[string]*Binary
}

// New is a locator with this process's defaults: the user cache folder
// ($XDG_CACHE_HOME/hemra/sandbox-programs, else ~/.cache/...), the go
// command on PATH, the process's environment.
func New() *Locator {
	l := &Locator{Environ: os.Environ()}
	if dir, err := os.UserCacheDir(); err == nil {
		l.CacheDir = filepath.Join(dir, "hemra", "sandbox-programs")
	}
	if g, err := exec.LookPath("go"); err == nil {
		l.Go = g
	}
	return l
}

var (
	defaultOnce sync.Once
	defaultLoc  *Locator
)

// Default is the process-wide locator made by New, shared so that one
// program is built at most once per process.
func Default() *Locator {
	defaultOnce.Do(func() { defaultLoc = New() })
	return defaultLoc
}

// Get returns the named program for platform p from the default locator.
func Get(ctx context.Context, name string, p Platform) (*Binary, error) {
	return Default().Get(ctx, name, p)
}

// prebuilt holds the binaries `make build` embedded (build tag
// hemra_prebuilt), laid out like the cache; nil otherwise.
var prebuilt fs.FS

// Get returns the named program for platform p: from the cache, from the
// binaries embedded in this build, or built now from the embedded sources
// (once per process and cache; concurrent callers wait for one build).
func (l *Locator) Get(ctx context.Context, name string, p Platform) (*Binary, error) {
	s, err := sources(name)
	if err != nil {
		return nil, err
	}
	key := name + "\x00" + p.String()
	l.mu.Lock()
	if b := l.found[key]; b != nil {
		l.mu.Unlock()
		c := *b
		return &c, nil
	}
	if l.keyMu == nil {
		l.keyMu, l.found = map[string]*sync.Mutex{}, map[string]*Binary{}
	}
	km := l.keyMu[key]
	if km == nil {
		km = &sync.Mutex{}
		l.keyMu[key] = km
	}
	l.mu.Unlock()

	km.Lock()
	defer km.Unlock()
	l.mu.Lock()
	if b := l.found[key]; b != nil {
		l.mu.Unlock()
		c := *b
		return &c, nil
	}
	l.mu.Unlock()

	b, err := l.get(ctx, s, p)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.found[key] = b
	l.mu.Unlock()
	c := *b
	return &c, nil
}

func (l *Locator) get(ctx context.Context, s *sourceSet, p Platform) (*Binary, error) {
	if l.CacheDir == "" {
		return nil, fmt.Errorf("%s for %s: no cache folder to keep it in (set XDG_CACHE_HOME or HOME)", s.name, p)
	}
	rel := path.Join(hashDir(s.hash), p.OS+"-"+p.Arch, s.name)
	dst := filepath.Join(l.CacheDir, filepath.FromSlash(rel))
	b := &Binary{Name: s.name, Platform: p, Path: dst, SourceHash: s.hash}
	if sum, err := fileSHA256(dst); err == nil {
		b.SHA256, b.Origin = sum, OriginCache
		return b, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s for %s in the cache: %w", s.name, p, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return nil, fmt.Errorf("preparing the cache for %s: %w", s.name, err)
	}
	if data, err := l.prebuiltBytes(rel); err == nil {
		if err := writeAtomic(dst, data); err != nil {
			return nil, fmt.Errorf("writing the embedded %s for %s to the cache: %w", s.name, p, err)
		}
		b.Origin = OriginPrebuilt
	} else {
		if err := l.build(ctx, s, p, dst); err != nil {
			return nil, err
		}
		b.Origin = OriginBuilt
	}
	sum, err := fileSHA256(dst)
	if err != nil {
		return nil, err
	}
	b.SHA256 = sum
	return b, nil
}

func (l *Locator) prebuiltBytes(rel string) ([]byte, error) {
	if prebuilt == nil || l.NoPrebuilt {
		return nil, fs.ErrNotExist
	}
	return fs.ReadFile(prebuilt, rel)
}

// build compiles the program's embedded sources, in a throwaway module
// with the same module path, statically and reproducibly (-trimpath, no
// build ID, no VCS stamp), into dst.
func (l *Locator) build(ctx context.Context, s *sourceSet, p Platform, dst string) error {
	m, err := embeddedModule()
	if err != nil {
		return err
	}
	if l.Go == "" {
		return fmt.Errorf("hemra needs its in-sandbox program %s for %s: this build does not embed it and there is no go command on PATH to build it; build hemra with `make build`, or install Go (https://go.dev/dl)", s.name, p)
	}
	tmp, err := os.MkdirTemp("", "hemra-sandboxbin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	gomod := fmt.Sprintf("module %s\n\ngo %s\n", m.path, m.goV)
	if err := os.WriteFile(filepath.Join(tmp, "go.mod"), []byte(gomod), 0o600); err != nil {
		return err
	}
	for rel, data := range s.files {
		f := filepath.Join(tmp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(f, data, 0o600); err != nil {
			return err
		}
	}
	out := filepath.Join(tmp, "out")
	cmd := exec.CommandContext(ctx, l.Go, "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", out, "./"+s.pkg)
	cmd.Dir = tmp
	cmd.Env = buildEnv(l.Environ, p)
	if msg, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("building %s for %s with %s: %v\n%s", s.name, p, l.Go, err, lastLines(string(msg), 20))
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	return writeAtomic(dst, data)
}

// buildEnv is environ with the settings a static, reproducible build of
// one program needs, and without the ones that would change it.
func buildEnv(environ []string, p Platform) []string {
	drop := map[string]bool{"GOOS": true, "GOARCH": true, "CGO_ENABLED": true, "GOFLAGS": true, "GOWORK": true, "GO111MODULE": true}
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	return append(env, "GOOS="+p.OS, "GOARCH="+p.Arch, "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off", "GO111MODULE=on")
}

// writeAtomic puts data at dst (mode 0555) through a rename, so that a
// concurrent reader never sees half a file and two writers of the same
// content do no harm.
func writeAtomic(dst string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o555)
	}
	if werr == nil {
		werr = os.Rename(tmp, dst)
	}
	if werr != nil {
		_ = os.Remove(tmp)
	}
	return werr
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", p)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Status says, without building anything, where a program would come
// from: for `hemra doctor`.
type Status struct {
	Name     string   `json:"name"`
	Platform Platform `json:"-"`
	// Source is "cache", "prebuilt", "build" (go build on first use) or ""
	// when it cannot be had; Detail says why in a few words.
	Source string `json:"source"`
	Detail string `json:"detail"`
	// SourceHash identifies the program's sources.
	SourceHash string `json:"source_hash,omitempty"`
}

// Status reports where program name for p would come from.
func (l *Locator) Status(name string, p Platform) Status {
	st := Status{Name: name, Platform: p}
	s, err := sources(name)
	if err != nil {
		st.Detail = err.Error()
		return st
	}
	st.SourceHash = s.hash
	rel := path.Join(hashDir(s.hash), p.OS+"-"+p.Arch, s.name)
	switch {
	case l.CacheDir != "" && exists(filepath.Join(l.CacheDir, filepath.FromSlash(rel))):
		st.Source, st.Detail = "cache", filepath.Join(l.CacheDir, filepath.FromSlash(rel))
	case func() bool { _, err := l.prebuiltBytes(rel); return err == nil }():
		st.Source, st.Detail = "prebuilt", "embedded in this hemra (make build)"
	case l.Go != "" && l.CacheDir != "":
		st.Source, st.Detail = "build", "built with "+l.Go+" into "+l.CacheDir+" on first use"
	default:
		st.Detail = "not embedded in this build and no go command on PATH: build hemra with make build, or install Go"
	}
	return st
}

func exists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
