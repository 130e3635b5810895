package sandboxbin

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
)

// TestEmbeddedSourcesAreComplete checks, with the go command on the real
// module, that every package each program depends on is either in the
// standard library or in its embedded source set: so a binary built from
// the embedded sources is the program in this repository.
func TestEmbeddedSourcesAreComplete(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	names := Names()
	if len(names) == 0 || !contains(names, MCPConnect) {
		t.Fatalf("programs %v, want %s among them", names, MCPConnect)
	}
	m, err := embeddedModule()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		s, err := sources(name)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "../../cmd/"+name).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", name, err)
		}
		embeddedPkgs := map[string]bool{}
		for p := range s.files {
			embeddedPkgs[m.path+"/"+filepath.ToSlash(filepath.Dir(p))] = true
		}
		for _, dep := range strings.Fields(string(out)) {
			if !embeddedPkgs[dep] {
				t.Errorf("%s depends on %s, which is not in its embedded sources (list it in sources.go)", name, dep)
			}
		}
	}
}

// TestBuildIsStaticReproducibleAndCached builds the connector from the
// embedded sources into an empty cache: a static executable; a second
// locator finds the same file in the cache; a build into another cache is
// byte for byte the same.
func TestBuildIsStaticReproducibleAndCached(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	ctx := context.Background()
	newLoc := func(dir string) *Locator {
		l := New()
		l.CacheDir, l.NoPrebuilt = dir, true
		return l
	}
	cache := t.TempDir()
	b, err := newLoc(cache).Get(ctx, MCPConnect, Linux())
	if err != nil {
		t.Fatal(err)
	}
	if b.Origin != OriginBuilt || !strings.HasPrefix(b.Path, cache) || !strings.HasPrefix(b.SHA256, "sha256:") {
		t.Fatalf("first get: %+v", b)
	}
	want, _ := SourceHash(MCPConnect)
	if b.SourceHash != want {
		t.Fatalf("source hash %s, want %s", b.SourceHash, want)
	}
	st, err := os.Stat(b.Path)
	if err != nil || st.Mode().Perm() != 0o555 {
		t.Fatalf("binary %v mode %v", err, st.Mode())
	}
	f, err := elf.Open(b.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("%s is dynamically linked (%v)", b.Path, p.Type)
		}
	}
	f.Close()

	again, err := newLoc(cache).Get(ctx, MCPConnect, Linux())
	if err != nil {
		t.Fatal(err)
	}
	if again.Origin != OriginCache || again.Path != b.Path || again.SHA256 != b.SHA256 {
		t.Fatalf("second get: %+v, first %+v", again, b)
	}
	other, err := newLoc(t.TempDir()).Get(ctx, MCPConnect, Linux())
	if err != nil {
		t.Fatal(err)
	}
	if other.SHA256 != b.SHA256 {
		t.Fatalf("two builds differ: %s and %s", other.SHA256, b.SHA256)
	}
}

func TestPrebuiltIsWrittenToTheCache(t *testing.T) {
	s, err := sources(MCPConnect)
	if err != nil {
		t.Fatal(err)
	}
	rel := hashDir(s.hash) + "/linux-arm64/" + MCPConnect
	saved := prebuilt
	t.Cleanup(func() { prebuilt = saved })
	prebuilt = fstest.MapFS{rel: {Data: []byte("\x7fELF prebuilt")}}
	l := &Locator{CacheDir: t.TempDir()}
	if st := l.Status(MCPConnect, Platform{"linux", "arm64"}); st.Source != "prebuilt" {
		t.Fatalf("status %+v", st)
	}
	b, err := l.Get(context.Background(), MCPConnect, Platform{"linux", "arm64"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(b.Path)
	if b.Origin != OriginPrebuilt || string(data) != "\x7fELF prebuilt" {
		t.Fatalf("%+v %q", b, data)
	}
	if st := l.Status(MCPConnect, Platform{"linux", "arm64"}); st.Source != "cache" {
		t.Fatalf("status after get %+v", st)
	}
	// A binary embedded from other sources (another hash) is not used.
	prebuilt = fstest.MapFS{"0000/linux-arm64/" + MCPConnect: {Data: []byte("stale")}}
	if _, err := (&Locator{CacheDir: t.TempDir()}).Get(context.Background(), MCPConnect, Platform{"linux", "arm64"}); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("stale prebuilt without go: %v", err)
	}
}

func TestNoToolchainSaysHowToGetOne(t *testing.T) {
	l := &Locator{CacheDir: t.TempDir(), NoPrebuilt: true}
	_, err := l.Get(context.Background(), MCPConnect, Linux())
	if err == nil || !strings.Contains(err.Error(), "make build") || !strings.Contains(err.Error(), "install Go") {
		t.Fatalf("err = %v", err)
	}
	if st := l.Status(MCPConnect, Linux()); st.Source != "" || !strings.Contains(st.Detail, "make build") {
		t.Fatalf("status %+v", st)
	}
	if _, err := l.Get(context.Background(), "no-such-program", Linux()); err == nil || !strings.Contains(err.Error(), MCPConnect) {
		t.Fatalf("unknown program: %v", err)
	}
}

func TestSourceSetRules(t *testing.T) {
	mod := func(files map[string]string) *module {
		fsys := fstest.MapFS{"go.mod": {Data: []byte("module example.com/m\n\ngo 1.26.0\n")}}
		for p, s := range files {
			fsys[p] = &fstest.MapFile{Data: []byte(s)}
		}
		m, err := readModule(fsys)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	good := map[string]string{
		"cmd/p/main.go":      "package main\nimport (\"fmt\"; \"example.com/m/lib\")\nfunc main(){ fmt.Println(lib.X) }\n",
		"cmd/p/main_test.go": "package main\nimport \"github.com/other/x\"\n",
		"lib/lib.go":         "package lib\nconst X = 1\n",
	}
	s, err := mod(good).sourceSet("p")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for p := range s.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	if strings.Join(paths, " ") != "cmd/p/main.go lib/lib.go" {
		t.Fatalf("files %v (tests are not sources)", paths)
	}
	// Any edit to a file it is built from changes the hash; a test file does not.
	edited := map[string]string{}
	for k, v := range good {
		edited[k] = v
	}
	edited["lib/lib.go"] = "package lib\nconst X = 2\n"
	if s2, _ := mod(edited).sourceSet("p"); s2.hash == s.hash {
		t.Fatal("editing an imported package left the hash unchanged")
	}
	edited["lib/lib.go"] = good["lib/lib.go"]
	edited["cmd/p/main_test.go"] = "package main\n"
	if s3, _ := mod(edited).sourceSet("p"); s3.hash != s.hash {
		t.Fatal("editing a test file changed the hash")
	}

	if _, err := mod(map[string]string{"cmd/p/main.go": "package main\nimport \"github.com/other/x\"\n"}).sourceSet("p"); err == nil || !strings.Contains(err.Error(), "only the standard library") {
		t.Fatalf("third-party import: %v", err)
	}
	if _, err := mod(map[string]string{"cmd/p/main.go": "package main\nimport \"example.com/m/missing\"\n"}).sourceSet("p"); err == nil || !strings.Contains(err.Error(), "not embedded") {
		t.Fatalf("missing package: %v", err)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
