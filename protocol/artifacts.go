package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hemra-dev/hemra/state"
)

// Default artifact quotas.
const (
	DefaultMaxArtifactFileBytes  = 100 << 20
	DefaultMaxArtifactTotalBytes = 1 << 30
	DefaultMaxArtifactFiles      = 10000
)

// ArtifactLimits are the quotas of one attempt's artifact folder. Zero
// values take the defaults.
type ArtifactLimits struct {
	MaxFileBytes  int64
	MaxTotalBytes int64
	MaxFiles      int // entries of any kind, so a million symlinks is bounded too
}

func (l ArtifactLimits) withDefaults() ArtifactLimits {
	orDefault(&l.MaxFileBytes, DefaultMaxArtifactFileBytes)
	orDefault(&l.MaxTotalBytes, DefaultMaxArtifactTotalBytes)
	orDefault(&l.MaxFiles, DefaultMaxArtifactFiles)
	return l
}

// ArtifactSet is what CollectArtifacts found.
type ArtifactSet struct {
	// Files are the regular files, in walk (lexical) order, with the size
	// and SHA-256 hemra computed while reading them.
	Files []state.Artifact
	// Skipped are the entries that are not regular files (symlinks,
	// sockets, devices...). They are reported, never read or followed.
	Skipped []SkippedArtifact
}

// SkippedArtifact is one entry left out of an attempt's artifacts.
type SkippedArtifact struct {
	Path   string // relative to the artifact folder, slash-separated
	Reason string
}

// ArtifactError is a quota violation; it names the file at fault.
type ArtifactError struct {
	Path string
	Msg  string
}

func (e *ArtifactError) Error() string {
	return fmt.Sprintf("artifact %s: %s", e.Path, e.Msg)
}

// CollectArtifacts walks an attempt's artifact folder and returns its
// regular files with their SHA-256, computed by hemra while reading each
// file through a descriptor opened without following symlinks, inside an
// os.Root so no path can resolve outside dir. Symlinks and other special
// files are skipped and reported. Going over a quota is an error naming
// the file. A missing folder holds no artifacts.
func CollectArtifacts(dir string, limits ArtifactLimits) (*ArtifactSet, error) {
	limits = limits.withDefaults()
	set := &ArtifactSet{}
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return set, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("the artifact folder %s is not a folder (%s)", dir, describeMode(fi.Mode()))
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()

	var total int64
	entries := 0
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		entries++
		if entries > limits.MaxFiles {
			return &ArtifactError{Path: p, Msg: fmt.Sprintf("more than %d entries in the artifact folder", limits.MaxFiles)}
		}
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			set.Skipped = append(set.Skipped, SkippedArtifact{Path: p, Reason: "not a regular file (" + describeMode(d.Type()) + "); not followed"})
			return nil
		}
		a, err := hashArtifact(root, p, limits.MaxFileBytes)
		if err != nil {
			return err
		}
		if a == nil {
			set.Skipped = append(set.Skipped, SkippedArtifact{Path: p, Reason: "replaced by a non-regular file while being read; not followed"})
			return nil
		}
		total += a.Size
		if total > limits.MaxTotalBytes {
			return &ArtifactError{Path: p, Msg: fmt.Sprintf("the artifacts exceed the %s total quota", formatBytes(limits.MaxTotalBytes))}
		}
		set.Files = append(set.Files, *a)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return set, nil
}

// hashArtifact reads one file, refusing a symlink at the last component
// (O_NOFOLLOW; os.Root already refuses any that leads outside) and
// anything that is not a regular file once opened. It returns nil when the
// entry turned into something else between the walk and the open.
func hashArtifact(root *os.Root, p string, maxBytes int64) (*state.Artifact, error) {
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("artifact %s: %w", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil
	}
	if fi.Size() > maxBytes {
		return nil, &ArtifactError{Path: p, Msg: fmt.Sprintf("%s is over the %s per-file quota", formatBytes(fi.Size()), formatBytes(maxBytes))}
	}
	h := sha256.New()
	// The file may grow while being read: never read past the quota.
	n, err := io.Copy(h, io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", p, err)
	}
	if n > maxBytes {
		return nil, &ArtifactError{Path: p, Msg: fmt.Sprintf("grew over the %s per-file quota while being read", formatBytes(maxBytes))}
	}
	return &state.Artifact{Path: filepath.ToSlash(p), Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// StoreArtifacts copies collected artifacts into the store through put
// (state.Store.PutBlobFile) and checks that each stored blob has the hash
// CollectArtifacts computed, so a file swapped after collection is caught.
func StoreArtifacts(dir string, files []state.Artifact, put func(path string) (sha string, size int64, err error)) error {
	for _, a := range files {
		sha, _, err := put(filepath.Join(dir, filepath.FromSlash(a.Path)))
		if err != nil {
			return fmt.Errorf("storing artifact %s: %w", a.Path, err)
		}
		if sha != a.SHA256 {
			return &ArtifactError{Path: a.Path, Msg: "changed between collection and storage"}
		}
	}
	return nil
}

func describeMode(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeSymlink != 0:
		return "symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "named pipe"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeDevice != 0:
		return "device"
	case t.IsDir():
		return "folder"
	case t.IsRegular():
		return "regular file"
	}
	return "special file"
}
