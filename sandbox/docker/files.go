package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// owner is who files copied into a container belong to. A numeric user
// is written into the archive; a user name is left to the engine to look
// up in the image's /etc/passwd (CopyUIDGID).
type owner struct {
	uid, gid int
	numeric  bool
}

func ownerOf(user string) owner {
	u, g, hasGroup := strings.Cut(user, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !hasGroup {
		gid, err2 = uid, err1
	}
	if err1 != nil || err2 != nil {
		return owner{}
	}
	return owner{uid: uid, gid: gid, numeric: true}
}

func (o owner) header(h *tar.Header) *tar.Header {
	if o.numeric {
		h.Uid, h.Gid = o.uid, o.gid
	}
	return h
}

func (o owner) copyOptions() container.CopyToContainerOptions {
	return container.CopyToContainerOptions{CopyUIDGID: !o.numeric}
}

// maxDownload bounds what one Download writes to the host.
const maxDownload = 4 << 30

// dirTar is a tar of empty folders (paths relative to the extraction
// point), used to create the Harbor folders owned by the container's user.
func dirTar(dirs []string, o owner) io.Reader {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range dirs {
		_ = tw.WriteHeader(o.header(&tar.Header{Name: strings.Trim(d, "/") + "/", Mode: 0o755, Typeflag: tar.TypeDir}))
	}
	_ = tw.Close()
	return &buf
}

// Upload copies a host file or folder to dst inside the container: a
// folder's contents are merged into dst, a file becomes dst. Only regular
// files and folders are copied; symlinks are skipped, never followed.
// Files are owned by the container's user.
// Before a OneCommand instance's container exists, the upload is checked
// and made once the container is created, before its command starts.
func (in *instance) Upload(ctx context.Context, hostPath, dst string) error {
	if in.bare {
		return errBare
	}
	if !path.IsAbs(dst) {
		return fmt.Errorf("upload: %q is not an absolute path in the container", dst)
	}
	st, err := os.Lstat(hostPath)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	if !st.IsDir() && !st.Mode().IsRegular() {
		return fmt.Errorf("upload: %s is not a regular file or a folder", hostPath)
	}
	in.mu.Lock()
	if in.mode == modeDeferred {
		in.pending = append(in.pending, pendingUpload{hostPath, dst})
		in.mu.Unlock()
		return nil
	}
	in.mu.Unlock()
	return in.upload(ctx, hostPath, dst)
}

// upload copies hostPath to dst in the created container.
func (in *instance) upload(ctx context.Context, hostPath, dst string) error {
	dst = path.Clean(dst)
	st, err := os.Lstat(hostPath)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	if !st.IsDir() && !st.Mode().IsRegular() {
		return fmt.Errorf("upload: %s is not a regular file or a folder", hostPath)
	}
	// Extract at the deepest folder that exists, naming the missing ones
	// in the archive, so existing parents keep their owner and mode.
	base, missing := dst, []string(nil)
	for i := 0; i < 64; i++ {
		stat, err := in.p.cli.ContainerStatPath(ctx, in.id, base)
		if err == nil {
			if !stat.Mode.IsDir() {
				if base == dst && !st.IsDir() {
					// Replacing a file: extract into its folder.
					missing = []string{path.Base(dst)}
					base = path.Dir(dst)
					break
				}
				return fmt.Errorf("upload: %s exists in the container and is not a folder", base)
			}
			break
		}
		if !client.IsErrNotFound(err) {
			return fmt.Errorf("upload: %w", err)
		}
		if base == "/" {
			break
		}
		missing = append([]string{path.Base(base)}, missing...)
		base = path.Dir(base)
	}
	prefix := strings.Join(missing, "/")

	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := writeTree(tw, hostPath, st, prefix, ownerOf(in.user))
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	err = in.p.cli.CopyToContainer(ctx, in.id, base, pr, ownerOf(in.user).copyOptions())
	pr.CloseWithError(err)
	if err != nil {
		return fmt.Errorf("upload %s to %s: %w", filepath.Base(hostPath), dst, err)
	}
	return nil
}

// writeTree writes hostPath under name prefix: the missing parent
// folders of prefix, then the file or the folder's tree.
func writeTree(tw *tar.Writer, hostPath string, st fs.FileInfo, prefix string, o owner) error {
	if prefix != "" {
		parts := strings.Split(prefix, "/")
		last := len(parts)
		if !st.IsDir() {
			last-- // the last part is the file itself
		}
		for i := 1; i <= last; i++ {
			if err := tw.WriteHeader(o.header(&tar.Header{Name: strings.Join(parts[:i], "/") + "/", Mode: 0o755, Typeflag: tar.TypeDir})); err != nil {
				return err
			}
		}
	}
	if !st.IsDir() {
		return writeFile(tw, hostPath, prefix, st, o)
	}
	return filepath.WalkDir(hostPath, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(hostPath, p)
		if rel == "." {
			return nil
		}
		name := filepath.ToSlash(rel)
		if prefix != "" {
			name = prefix + "/" + name
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return tw.WriteHeader(o.header(&tar.Header{Name: name + "/", Mode: int64(info.Mode().Perm()), Typeflag: tar.TypeDir, ModTime: info.ModTime()}))
		case info.Mode().IsRegular():
			return writeFile(tw, p, name, info, o)
		}
		return nil // symlinks, devices, sockets: skipped
	})
}

func writeFile(tw *tar.Writer, hostPath, name string, info fs.FileInfo, o owner) error {
	f, err := os.Open(hostPath)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(o.header(&tar.Header{Name: name, Mode: int64(info.Mode().Perm()), Size: info.Size(), Typeflag: tar.TypeReg, ModTime: info.ModTime()})); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, info.Size())
	return err
}

// Download copies a file or folder of the container to hostPath. Only
// regular files and folders come back; symlinks, devices and names that
// would leave hostPath are skipped.
func (in *instance) Download(ctx context.Context, src, hostPath string) error {
	if in.bare {
		return errBare
	}
	src = path.Clean(src)
	if err := in.ensureContainer(ctx); err != nil {
		return fmt.Errorf("download %s: %w", src, err)
	}
	for target, host := range in.binds {
		if src == target || strings.HasPrefix(src, target+"/") {
			return downloadHost(filepath.Join(host, filepath.FromSlash(strings.TrimPrefix(src, target))), hostPath)
		}
	}
	rc, stat, err := in.p.cli.CopyFromContainer(ctx, in.id, src)
	if client.IsErrNotFound(err) {
		return fmt.Errorf("download %s: %w (%v)", src, os.ErrNotExist, err)
	}
	if err != nil {
		return fmt.Errorf("download %s: %w", src, err)
	}
	defer rc.Close()
	if stat.Mode&os.ModeSymlink != 0 {
		return fmt.Errorf("download %s: is a symlink", src)
	}
	if err := extractTar(rc, hostPath, stat.Mode.IsDir()); err != nil {
		return fmt.Errorf("download %s: %w", src, err)
	}
	return nil
}

// downloadHost copies a host-bound folder (or a file in it) the container
// wrote to hostPath, with the same rules as the copy API path: regular
// files and folders only, symlinks never followed.
func downloadHost(src, hostPath string) error {
	st, err := os.Lstat(src)
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	if !st.IsDir() && !st.Mode().IsRegular() {
		return fmt.Errorf("download %s: not a regular file or a folder", filepath.Base(src))
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := writeTree(tw, src, st, filepath.Base(src), owner{})
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	err = extractTar(pr, hostPath, st.IsDir())
	pr.CloseWithError(err)
	return err
}

// extractTar writes a copy-API archive (whose first name component is the
// copied file or folder) to hostPath.
func extractTar(r io.Reader, hostPath string, isDir bool) error {
	if isDir {
		if err := os.MkdirAll(hostPath, 0o755); err != nil {
			return err
		}
	} else if err := os.MkdirAll(filepath.Dir(hostPath), 0o755); err != nil {
		return err
	}
	root, err := filepath.EvalSymlinks(filepath.Dir(hostPath))
	if err != nil {
		return err
	}
	root = filepath.Join(root, filepath.Base(hostPath))
	var total int64
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "/"))
		_, rest, _ := strings.Cut(name, "/")
		if !isDir {
			rest = ""
		}
		if strings.HasPrefix(rest, "../") || rest == ".." {
			continue
		}
		target := root
		if rest != "" {
			target = filepath.Join(root, filepath.FromSlash(rest))
		}
		if !within(root, target) {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if total += h.Size; total > maxDownload {
				return fmt.Errorf("more than %d bytes", maxDownload)
			}
			// A folder on the way may not be a symlink planted earlier.
			parent, err := filepath.EvalSymlinks(filepath.Dir(target))
			if err != nil {
				if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
					return err
				}
				parent, err = filepath.EvalSymlinks(filepath.Dir(target))
				if err != nil {
					return err
				}
			}
			if !within(root, filepath.Join(parent, filepath.Base(target))) {
				continue
			}
			mode := os.FileMode(0o644)
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
			_ = os.Remove(target)
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
			if err != nil {
				return err
			}
			_, err = io.CopyN(f, tr, h.Size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

// readJSONStream reads the engine's build or pull progress stream: it
// returns the first error message, and hands each aux payload to aux.
func readJSONStream(r io.Reader, aux func(json.RawMessage)) error {
	dec := json.NewDecoder(r)
	var log strings.Builder
	for {
		var m struct {
			Stream      string                   `json:"stream"`
			Error       string                   `json:"error"`
			ErrorDetail struct{ Message string } `json:"errorDetail"`
			Aux         json.RawMessage          `json:"aux"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if log.Len() < 64<<10 {
			log.WriteString(m.Stream)
		}
		if m.Error != "" {
			tail := log.String()
			if len(tail) > 4000 {
				tail = tail[len(tail)-4000:]
			}
			return fmt.Errorf("%s\n%s", m.Error, tail)
		}
		if len(m.Aux) > 0 && aux != nil {
			aux(m.Aux)
		}
	}
}
