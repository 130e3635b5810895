package protocol_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hemra-dev/hemra/protocol"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCollectArtifacts(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "report.md"), "# report\n")
	write(t, filepath.Join(dir, "sub", "deep", "data.json"), "{}")
	os.Symlink("/etc/passwd", filepath.Join(dir, "passwd"))
	os.Symlink("report.md", filepath.Join(dir, "inside-link"))
	os.Symlink("/etc", filepath.Join(dir, "sub", "etc"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}

	set, err := protocol.CollectArtifacts(dir, protocol.ArtifactLimits{})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("# report\n"))
	var files []string
	for _, f := range set.Files {
		files = append(files, f.Path)
		if f.Path == "report.md" && (f.Size != 9 || f.SHA256 != hex.EncodeToString(sum[:])) {
			t.Errorf("report.md: %+v", f)
		}
	}
	if got := strings.Join(files, " "); got != "report.md sub/deep/data.json" {
		t.Errorf("files: %s", got)
	}
	var skipped []string
	for _, s := range set.Skipped {
		skipped = append(skipped, s.Path+": "+s.Reason)
	}
	want := "fifo: not a regular file (named pipe); not followed|" +
		"inside-link: not a regular file (symbolic link); not followed|" +
		"passwd: not a regular file (symbolic link); not followed|" +
		"sub/etc: not a regular file (symbolic link); not followed"
	if got := strings.Join(skipped, "|"); got != want {
		t.Errorf("skipped:\n got %s\nwant %s", got, want)
	}
}

func TestArtifactQuotas(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.txt"), strings.Repeat("a", 600))
	write(t, filepath.Join(dir, "b.txt"), strings.Repeat("b", 600))
	write(t, filepath.Join(dir, "c.txt"), "c")
	for _, tc := range []struct {
		limits protocol.ArtifactLimits
		want   string
	}{
		{protocol.ArtifactLimits{MaxFileBytes: 500}, "artifact a.txt: 600 bytes is over the 500 bytes per-file quota"},
		{protocol.ArtifactLimits{MaxTotalBytes: 1 << 10}, "artifact b.txt: the artifacts exceed the 1 KiB total quota"},
		{protocol.ArtifactLimits{MaxFiles: 2}, "artifact c.txt: more than 2 entries in the artifact folder"},
	} {
		_, err := protocol.CollectArtifacts(dir, tc.limits)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: error %v, want %q", tc.limits, err, tc.want)
		}
	}
}

func TestArtifactFolderEdgeCases(t *testing.T) {
	set, err := protocol.CollectArtifacts(filepath.Join(t.TempDir(), "missing"), protocol.ArtifactLimits{})
	if err != nil || len(set.Files) != 0 {
		t.Errorf("a missing folder: %+v, %v", set, err)
	}
	link := filepath.Join(t.TempDir(), "artifacts")
	os.Symlink("/etc", link)
	if _, err := protocol.CollectArtifacts(link, protocol.ArtifactLimits{}); err == nil || !strings.Contains(err.Error(), "is not a folder (symbolic link)") {
		t.Errorf("a symlinked artifact folder: %v", err)
	}
}
