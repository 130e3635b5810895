package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/hemra-dev/hemra/sandbox/archive"
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

// archiveOwner is o as the archive package takes it.
func (o owner) archiveOwner() archive.Owner {
	return archive.Owner{UID: o.uid, GID: o.gid, Set: o.numeric}
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
		err := archive.WriteTree(tw, hostPath, st, prefix, ownerOf(in.user).archiveOwner())
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
	if err := archive.Extract(rc, hostPath, stat.Mode.IsDir(), maxDownload); err != nil {
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
		err := archive.WriteTree(tw, src, st, filepath.Base(src), archive.Owner{})
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	err = archive.Extract(pr, hostPath, st.IsDir(), maxDownload)
	pr.CloseWithError(err)
	return err
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
