package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/hemra-dev/hemra/dataset"
	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/sandbox/archive"
)

// ImageResolver resolves an image reference to an immutable one (the
// planner's interface; Resolver implements it).
type ImageResolver interface {
	Resolve(ctx context.Context, ref string) (string, error)
}

// ErrCompose is returned for tasks whose environment is a docker-compose
// file: the docker sandbox runs one container per stage and refuses them.
var ErrCompose = errors.New("docker-compose task environments are not supported by the docker sandbox")

// buildHashVersion changes when the way a task image is built changes, so
// that every task image is rebuilt once.
const buildHashVersion = "hemra-task-image/1"

// TaskBuild works out how a Harbor task's image is built: its
// environment/Dockerfile's FROM references resolved to immutable ones and
// a hash over the build context's files and those references. It returns
// nil when the task does not build an image (no Dockerfile), and
// ErrCompose for a compose task.
func TaskBuild(ctx context.Context, r ImageResolver, t *dataset.Task) (*sandbox.Build, error) {
	if t.HasCompose() {
		return nil, fmt.Errorf("task %s: %w", t.Name, ErrCompose)
	}
	if !t.HasDockerfile() {
		return nil, nil
	}
	ctxDir := filepath.Join(t.Dir, "environment")
	df, err := os.ReadFile(filepath.Join(ctxDir, "Dockerfile"))
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", t.Name, err)
	}
	refs, err := FromRefs(df)
	if err != nil {
		return nil, fmt.Errorf("task %s: environment/Dockerfile: %w", t.Name, err)
	}
	b := &sandbox.Build{Context: ctxDir, From: map[string]string{}}
	for _, ref := range refs {
		pinned, err := r.Resolve(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("task %s: environment/Dockerfile FROM %s: %w", t.Name, ref, err)
		}
		b.From[ref] = pinned
	}
	b.Hash = BuildHash(t.Environment, b.From)
	return b, nil
}

// BuildHash is the identity of a task image: the build context's files
// (relative paths, contents, executable bits) and the pinned FROM
// references. Paths on disk and times are not part of it.
func BuildHash(files []dataset.File, from map[string]string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", buildHashVersion)
	sorted := append([]dataset.File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for _, f := range sorted {
		fmt.Fprintf(h, "file %q %s %o\n", f.Path, f.SHA256, f.Mode&0o111)
	}
	keys := make([]string, 0, len(from))
	for k := range from {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "from %q %q\n", k, from[k])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// FromRefs lists the image references of a Dockerfile's FROM lines, in
// order and without repeats, leaving out `scratch` and earlier build
// stages. A FROM that uses a build argument cannot be pinned and is an
// error.
func FromRefs(dockerfile []byte) ([]string, error) {
	var refs []string
	seen := map[string]bool{}
	stages := map[string]bool{}
	for _, ins := range instructions(dockerfile) {
		f := strings.Fields(ins.text)
		if len(f) == 0 || !strings.EqualFold(f[0], "FROM") {
			continue
		}
		args := f[1:]
		for len(args) > 0 && strings.HasPrefix(args[0], "--") {
			args = args[1:]
		}
		if len(args) == 0 {
			return nil, fmt.Errorf("line %d: FROM without an image", ins.line)
		}
		ref := args[0]
		isStage := stages[strings.ToLower(ref)]
		if len(args) >= 3 && strings.EqualFold(args[1], "AS") {
			stages[strings.ToLower(args[2])] = true
		}
		switch {
		case strings.EqualFold(ref, "scratch"), isStage:
			continue
		case strings.Contains(ref, "$"):
			return nil, fmt.Errorf("line %d: FROM %s uses a build argument, which hemra cannot pin to a digest; write the image reference out", ins.line, ref)
		}
		if !seen[ref] {
			seen[ref] = true
			refs = append(refs, ref)
		}
	}
	return refs, nil
}

type instruction struct {
	line int
	text string
}

// instructions joins a Dockerfile's continuation lines and drops comments.
func instructions(df []byte) []instruction {
	var out []instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(bytes.NewReader(df))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\"))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(trimmed)
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, instruction{line: start, text: s})
		}
		cur.Reset()
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, instruction{line: start, text: s})
	}
	return out
}

// pinDockerfile rewrites the FROM lines' references to their pinned ones.
func pinDockerfile(df []byte, from map[string]string) []byte {
	lines := strings.SplitAfter(string(df), "\n")
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.EqualFold(f[0], "FROM") {
			continue
		}
		for j := 1; j < len(f); j++ {
			if strings.HasPrefix(f[j], "--") {
				continue
			}
			if pinned, ok := from[f[j]]; ok {
				f[j] = pinned
				nl := ""
				if strings.HasSuffix(line, "\n") {
					nl = "\n"
				}
				lines[i] = strings.Join(f, " ") + nl
			}
			break
		}
	}
	return []byte(strings.Join(lines, ""))
}

// TaskImageTag is the tag a task image with this build hash gets.
func TaskImageTag(hash string) string {
	return TaskImageRepo + ":" + strings.TrimPrefix(hash, "sha256:")[:12]
}

// FindTaskImage returns the id of the image already built for this build
// hash, or "". A snapshot of a container started from the task image
// inherits its context label, so only images labelled as task images count.
func (p *Provider) FindTaskImage(ctx context.Context, hash string) (string, error) {
	imgs, err := p.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", LabelContext+"="+hash), filters.Arg("label", LabelRole+"="+RoleTaskImage))})
	if err != nil {
		return "", fmt.Errorf("listing task images: %w", err)
	}
	if len(imgs) == 0 {
		return "", nil
	}
	return imgs[0].ID, nil
}

// EnsureTaskImage returns the id of the task image for b, building it
// only when no image carries its hash: an unchanged task is never rebuilt.
func (p *Provider) EnsureTaskImage(ctx context.Context, b *sandbox.Build) (string, error) {
	p.buildMu.Lock()
	mu := p.builds[b.Hash]
	if mu == nil {
		mu = &sync.Mutex{}
		p.builds[b.Hash] = mu
	}
	p.buildMu.Unlock()
	mu.Lock()
	defer mu.Unlock()

	key := "build " + b.Hash
	if id, ok := p.present.Load(key); ok {
		return id.(string), nil
	}
	if id, err := p.FindTaskImage(ctx, b.Hash); err != nil || id != "" {
		if id != "" {
			p.present.Store(key, id)
		}
		return id, err
	}
	df, err := os.ReadFile(filepath.Join(b.Context, "Dockerfile"))
	if err != nil {
		return "", fmt.Errorf("task image: %w", err)
	}
	from := make(map[string]string, len(b.From))
	for ref, pin := range b.From {
		if from[ref], err = p.ensureImage(ctx, pin); err != nil {
			return "", fmt.Errorf("task image FROM %s: %w", ref, err)
		}
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(contextTar(pw, b.Context, pinDockerfile(df, from)))
	}()
	lbl := labels("", "", RoleTaskImage)
	lbl[LabelContext] = b.Hash
	resp, err := p.cli.ImageBuild(ctx, pr, build.ImageBuildOptions{
		Tags:        []string{TaskImageTag(b.Hash)},
		Labels:      lbl,
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
		Dockerfile:  "Dockerfile",
	})
	if err != nil {
		pr.CloseWithError(err)
		return "", fmt.Errorf("building the task image: %w", err)
	}
	defer resp.Body.Close()
	var id string
	err = readJSONStream(resp.Body, func(aux json.RawMessage) {
		var a struct{ ID string }
		if json.Unmarshal(aux, &a) == nil && a.ID != "" {
			id = a.ID
		}
	})
	if err != nil {
		return "", fmt.Errorf("building the task image from %s: %w", b.Context, err)
	}
	if id == "" {
		insp, err := p.cli.ImageInspect(ctx, TaskImageTag(b.Hash))
		if err != nil {
			return "", fmt.Errorf("task image built but not found: %w", err)
		}
		id = insp.ID
	}
	p.present.Store(key, id)
	return id, nil
}

// contextTar writes the build context with the pinned Dockerfile. Regular
// files, folders and symlinks (as links, for the engine to resolve inside
// the context) are sent. .dockerignore is not applied: the whole context
// is hashed and sent, as hemra fingerprints it.
func contextTar(w io.Writer, dir string, dockerfile []byte) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		name := filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case name == "Dockerfile":
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(dockerfile)), Typeflag: tar.TypeReg}); err != nil {
				return err
			}
			_, err := tw.Write(dockerfile)
			return err
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Name: name + "/", Mode: int64(info.Mode().Perm()), Typeflag: tar.TypeDir})
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return tw.WriteHeader(&tar.Header{Name: name, Linkname: target, Mode: 0o777, Typeflag: tar.TypeSymlink})
		case info.Mode().IsRegular():
			return archive.WriteFile(tw, p, name, info, archive.Owner{})
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
