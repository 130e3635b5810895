package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hemra-dev/hemra/sandbox"
)

// imageCache remembers the images pushed by this provider: one push per
// local image and registry, the others wait for it.
type imageCache struct {
	mu     sync.Mutex
	pushed map[string]string      // registry + local id → pushed digest reference
	locks  map[string]*sync.Mutex // one push at a time per key
}

func (c *imageCache) lock(key string) (*sync.Mutex, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locks == nil {
		c.locks, c.pushed = map[string]*sync.Mutex{}, map[string]string{}
	}
	m := c.locks[key]
	if m == nil {
		m = &sync.Mutex{}
		c.locks[key] = m
	}
	return m, c.pushed[key]
}

func (c *imageCache) remember(key, ref string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pushed[key] = ref
}

func (c *imageCache) known(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pushed[key]
}

// imageFor returns the image reference the pod runs: a task image built
// on the local engine and pushed to the sandbox's registry, a local image
// (an id, or a name pinned to an id) pushed likewise, or a reference
// pinned by a registry digest as it is.
func (p *Provider) imageFor(ctx context.Context, s sandbox.Settings) (string, error) {
	if s.Build != nil {
		if p.opts.Docker == nil {
			return "", errors.New("building the task image needs the Docker Engine on this host")
		}
		id, err := p.opts.Docker.EnsureTaskImage(ctx, s.Build)
		if err != nil {
			return "", err
		}
		return p.push(ctx, s, id, "hemra-task", strings.TrimPrefix(s.Build.Hash, "sha256:"))
	}
	ref := s.Image
	if strings.HasPrefix(ref, "sha256:") {
		return p.push(ctx, s, ref, "hemra-image", strings.TrimPrefix(ref, "sha256:"))
	}
	if _, digest, ok := strings.Cut(ref, "@"); ok && p.opts.Docker != nil {
		// A name pinned to the id of an image built here (it has no
		// registry digest): push that image.
		if insp, err := p.opts.Docker.Client().ImageInspect(ctx, digest); err == nil && insp.ID == digest {
			repo := strings.TrimSuffix(ref[:strings.Index(ref, "@")], ":latest")
			return p.push(ctx, s, digest, "hemra-image/"+sanitizeRepo(repo), strings.TrimPrefix(digest, "sha256:"))
		}
	}
	return ref, nil
}

func sanitizeRepo(r string) string {
	r = strings.ToLower(r)
	var b strings.Builder
	for _, c := range r {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.', c == '_', c == '/':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-./_")
}

// push copies a local image (by id) to the sandbox's registry as
// repo:<first 12 of tagHex> and returns it as repo@digest.
func (p *Provider) push(ctx context.Context, s sandbox.Settings, id, repo, tagHex string) (string, error) {
	registry := strings.TrimSuffix(settingsOf(s).Registry, "/")
	if registry == "" {
		return "", fmt.Errorf("image %s is on this host only: set registry in the kubernetes sandbox so hemra can push it where the cluster pulls from", short(id))
	}
	key := registry + "\x00" + id
	mu, done := p.images.lock(key)
	if done != "" {
		return done, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if done := p.images.known(key); done != "" {
		return done, nil
	}
	if len(tagHex) > 12 {
		tagHex = tagHex[:12]
	}
	opts := []name.Option{}
	if loopbackRegistry(registry) {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.NewTag(registry+"/"+repo+":"+tagHex, opts...)
	if err != nil {
		return "", fmt.Errorf("registry %q: %w", registry, err)
	}
	tmp, err := os.CreateTemp("", "hemra-image-*.tar")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	rc, err := p.opts.Docker.Client().ImageSave(ctx, []string{id})
	if err != nil {
		tmp.Close()
		return "", fmt.Errorf("reading image %s from the engine: %w", short(id), err)
	}
	_, err = io.Copy(tmp, rc)
	rc.Close()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("reading image %s from the engine: %w", short(id), err)
	}
	img, err := tarball.ImageFromPath(tmp.Name(), nil)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", short(id), err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("image %s: %w", short(id), err)
	}
	pinned := tag.Context().Digest(digest.String())
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if _, err := remote.Head(pinned, ropts...); err != nil {
		if err := remote.Write(tag, img, ropts...); err != nil {
			return "", fmt.Errorf("pushing image %s to %s: %w", short(id), tag, err)
		}
	}
	ref := pinned.String()
	p.images.remember(key, ref)
	return ref, nil
}

// loopbackRegistry says whether a registry is on this host's loopback,
// spoken to over plain HTTP (as containerd does for localhost).
func loopbackRegistry(registry string) bool {
	host := registry
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func short(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
