package executor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"github.com/hemra-dev/hemra/sandbox/local"
)

// spareWork keeps the emptied folders of removed local work folders for
// the attempts that follow: a nop attempt on the local sandbox made and
// removed its work folder's six folders (the workspace, app/, logs/,
// logs/agent/, logs/verifier/, artifacts/) every time, and on ext4 a mkdir
// and an rmdir cost more of hemra's CPU than the rest of the attempt's
// file work. A spare is a recorded attempt's work folder with everything
// but those folders removed, each still a plain folder with the mode the
// local sandbox gives a new one, renamed aside; the next local attempt's
// work folder is a spare renamed to its name, which the local sandbox's
// Start finds as it would have made it. Anything else (a folder the agent
// changed the mode of, replaced by a link, or could not be emptied) is
// removed as before. The spares left when the apply ends are removed.
type spareWork struct {
	mu     sync.Mutex
	spares []string
	made   int
	// mask is what the process's umask leaves of 0o777, and the other
	// mode bits of a new folder (umaskMask; 0: not known yet; noMask:
	// recycling is off).
	mask fs.FileMode
}

// maxSpares bounds the spares kept: attempts recorded in one batch hand
// theirs back together.
const maxSpares = 32

const noMask fs.FileMode = 1 << 31

// skeleton is what a spare keeps, parents first, with the mode each is
// made with (the workspace by prepareWorkspace, app/ and the logs by
// local.Start). The folders of collected/ the verifier's logs are copied
// to (collectedVerifierLogs) are kept when there, emptied by
// emptyCollected: a spare from an attempt whose verifier ran has them.
var skeleton = []struct {
	name     string
	perm     fs.FileMode
	optional bool // need not be there; 0o700 too (made by the copy out or by hemra)
}{
	{".", 0o700, false},
	{local.AppDir, 0o755, false},
	{"logs", 0o755, false},
	{local.AgentLogsDir, 0o755, false},
	{local.VerifierLogsDir, 0o755, false},
	{local.ArtifactsDir, 0o755, false},
	{"collected", 0o755, true},
	{filepath.Join("collected", "logs"), 0o755, true},
	{collectedVerifierLogs, 0o755, true},
}

// collectedVerifierLogs is where a single-step attempt's verifier logs
// are copied out to, in its work folder.
var collectedVerifierLogs = filepath.Join("collected", "logs", "verifier")

func inSkeleton(name string) bool {
	for _, s := range skeleton {
		if s.name == name {
			return true
		}
	}
	return false
}

// take makes ws (a work folder that does not exist) from a spare, or
// reports false.
func (w *spareWork) take(ws string) bool {
	w.mu.Lock()
	n := len(w.spares)
	if n == 0 {
		w.mu.Unlock()
		return false
	}
	spare := w.spares[n-1]
	w.spares = w.spares[:n-1]
	w.mu.Unlock()
	if err := os.Rename(spare, ws); err != nil {
		_ = os.RemoveAll(spare)
		return false
	}
	return true
}

// put empties ws to its skeleton and keeps it as a spare, or reports
// false (ws is left for the caller to remove).
func (w *spareWork) put(ws string) bool {
	mask := w.umaskMask(filepath.Dir(ws))
	if mask == noMask {
		return false
	}
	w.mu.Lock()
	full := len(w.spares) >= maxSpares
	w.made++
	spare := filepath.Join(filepath.Dir(ws), ".spare-"+strconv.Itoa(os.Getpid())+"-"+strconv.Itoa(w.made))
	w.mu.Unlock()
	if full || !scrub(ws, mask) {
		return false
	}
	if err := os.Rename(ws, spare); err != nil {
		return false
	}
	w.mu.Lock()
	w.spares = append(w.spares, spare)
	w.mu.Unlock()
	return true
}

// removeLeftSpares removes the spares in the work folder workRoot that an
// apply killed before its drain left behind. The apply holds the store's
// writer lock, so no other apply is using them.
func removeLeftSpares(workRoot string) {
	left, _ := filepath.Glob(filepath.Join(workRoot, ".spare-*"))
	for _, s := range left {
		_ = os.RemoveAll(s)
	}
}

// drain removes the spares.
func (w *spareWork) drain() {
	w.mu.Lock()
	spares := w.spares
	w.spares = nil
	w.mu.Unlock()
	for _, s := range spares {
		_ = os.RemoveAll(s)
	}
}

// umaskMask is what the umask leaves of 0o777, with the mode bits a new
// folder in dir gets beside them (setgid, inherited from a setgid dir),
// learnt once from a folder made there: reading the umask would change it
// for every goroutine.
func (w *spareWork) umaskMask(dir string) fs.FileMode {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mask != 0 {
		return w.mask
	}
	w.mask = noMask
	probe := filepath.Join(dir, ".umask-"+strconv.Itoa(os.Getpid()))
	_ = os.Remove(probe)
	if err := os.Mkdir(probe, 0o777); err != nil {
		return w.mask
	}
	defer os.Remove(probe)
	if fi, err := os.Lstat(probe); err == nil && fi.IsDir() && fi.Mode().Perm() != 0 {
		w.mask = fi.Mode() &^ fs.ModeDir
	}
	return w.mask
}

// scrub removes from ws all but its skeleton, and reports whether each
// folder of the skeleton is there, a plain folder with the mode a new one
// gets. It works inside ws only (an os.Root; no link followed out).
func scrub(ws string, mask fs.FileMode) bool {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return false
	}
	defer root.Close()
	for _, s := range skeleton {
		// Lstat: an os.Root follows a link that stays inside it, even
		// with O_NOFOLLOW.
		fi, err := root.Lstat(s.name)
		if s.optional && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		other := mask &^ fs.ModePerm
		if err != nil || fi.Mode() != fs.ModeDir|other|s.perm&mask && !(s.optional && fi.Mode() == fs.ModeDir|other|0o700&mask) {
			return false
		}
		if !removeChildren(root, s.name, inSkeleton) {
			return false
		}
	}
	return true
}

// emptyCollected empties a local attempt's collected/ once what it holds
// is stored, down to the folders its verifier logs were copied to, for a
// spare to keep (one mkdir and one rmdir fewer per folder and attempt).
// Anything it cannot empty goes whole. trimWorkspace removes the empty
// folders from a work folder that is kept.
func emptyCollected(dir string) {
	if !emptyTo(dir, "logs", filepath.Join("logs", "verifier")) {
		_ = os.RemoveAll(dir)
	}
}

// emptyTo removes everything in dir but the folders named (parents first,
// each inside the one before), and reports whether it could.
func emptyTo(dir string, keep ...string) bool {
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	defer root.Close()
	for _, name := range append([]string{"."}, keep...) {
		fi, err := root.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			return true
		}
		if err != nil || !fi.IsDir() {
			return false
		}
		if !removeChildren(root, name, func(child string) bool { return slices.Contains(keep, child) }) {
			return false
		}
	}
	return true
}

// removeChildren removes what the folder name in root holds but the
// entries kept says to keep (by their path in root), and reports whether
// it could.
func removeChildren(root *os.Root, name string, kept func(child string) bool) bool {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return false
	}
	for _, n := range names {
		child := filepath.Join(name, n)
		if kept(child) {
			continue
		}
		if err := root.RemoveAll(child); err != nil {
			return false
		}
	}
	return true
}
