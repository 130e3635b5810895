package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/distribution/reference"
	"github.com/docker/cli/cli/config/configfile"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
)

// Resolver turns image references into immutable ones through the engine:
// "name@sha256:<manifest digest>" for images from a registry, or
// "sha256:<image id>" for images that only exist in this engine (built
// locally, never pushed), which run only here. It implements the planner's
// ImageResolver.
type Resolver struct {
	cli     client.APIClient
	environ []string
}

// NewResolver resolves through cli, with the registry credentials of the
// Docker config that environ's DOCKER_CONFIG or HOME names.
func NewResolver(cli client.APIClient, environ []string) *Resolver {
	return &Resolver{cli: cli, environ: environ}
}

// Resolution errors, for callers that explain them.
var (
	ErrNoSuchImage = errors.New("no such image")
	ErrUnreachable = errors.New("registry unreachable")
	ErrAuth        = errors.New("registry authentication failed")
)

// Resolve returns the immutable reference ref runs as. A reference that
// already holds a digest is returned as is. A tag is resolved by the
// registry through the engine's distribution endpoint (so a tag moved
// upstream shows as a new digest); when the registry cannot be asked, the
// engine's local copy of the tag answers if it came from that registry.
// An image the engine built itself resolves to its image ID.
func (r *Resolver) Resolve(ctx context.Context, ref string) (string, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return "", errors.New("empty image reference")
	}
	if strings.HasPrefix(ref, "sha256:") {
		if _, err := r.cli.ImageInspect(ctx, ref); err != nil {
			return "", fmt.Errorf("image %s: %w: %v", ref, ErrNoSuchImage, err)
		}
		return ref, nil
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", fmt.Errorf("image %q: %v", ref, err)
	}
	if _, ok := named.(reference.Digested); ok {
		return ref, nil
	}
	named = reference.TagNameOnly(named)

	repo := reference.FamiliarName(named)
	local, localErr := r.cli.ImageInspect(ctx, ref)
	var localDigest string
	if localErr == nil {
		for _, d := range local.RepoDigests {
			if strings.HasPrefix(d, repo+"@") {
				localDigest = d
			}
		}
		if localDigest == "" {
			// Built here and never pulled or pushed under this name: the
			// image ID is its only identity.
			return local.ID, nil
		}
	}
	auth, err := registryAuth(r.environ, reference.FamiliarString(named))
	if err != nil {
		return "", err
	}
	dist, distErr := r.cli.DistributionInspect(ctx, named.String(), auth)
	if distErr == nil {
		return repo + "@" + dist.Descriptor.Digest.String(), nil
	}
	if localDigest != "" {
		return localDigest, nil
	}
	return "", fmt.Errorf("image %s: %w", ref, classify(distErr))
}

// classify turns an engine error into one of the resolution errors, with
// the engine's message kept.
func classify(err error) error {
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "unauthorized"), strings.Contains(msg, "authentication required"),
		strings.Contains(msg, "denied"), strings.Contains(msg, "forbidden"):
		return fmt.Errorf("%w: %v", ErrAuth, err)
	case strings.Contains(msg, "manifest unknown"), strings.Contains(msg, "not found"),
		strings.Contains(msg, "name unknown"), strings.Contains(msg, "does not exist"):
		return fmt.Errorf("%w: %v", ErrNoSuchImage, err)
	case strings.Contains(msg, "no such host"), strings.Contains(msg, "connection refused"),
		strings.Contains(msg, "timeout"), strings.Contains(msg, "dial tcp"), strings.Contains(msg, "network is unreachable"),
		strings.Contains(msg, "i/o timeout"), strings.Contains(msg, "tls"), strings.Contains(msg, "eof"):
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	return err
}

// registryAuth returns the engine's X-Registry-Auth header value for the
// registry of ref, from the operator's Docker config (auths, credsStore,
// credHelpers), or "" when the config has nothing for it.
func registryAuth(environ []string, ref string) (string, error) {
	dir := getenv(environ, "DOCKER_CONFIG")
	if dir == "" {
		home := getenv(environ, "HOME")
		if home == "" {
			return "", nil
		}
		dir = filepath.Join(home, ".docker")
	}
	file := filepath.Join(dir, "config.json")
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("docker config: %w", err)
	}
	defer f.Close()
	cf := configfile.New(file)
	if err := cf.LoadFromReader(f); err != nil {
		return "", fmt.Errorf("docker config %s: %w", file, err)
	}
	host := "docker.io"
	if named, err := reference.ParseNormalizedNamed(ref); err == nil {
		host = reference.Domain(named)
	}
	if host == "docker.io" {
		host = "https://index.docker.io/v1/"
	}
	ac, err := cf.GetAuthConfig(host)
	if err != nil {
		return "", fmt.Errorf("registry credentials for %s: %w", host, err)
	}
	if ac.Username == "" && ac.Password == "" && ac.IdentityToken == "" && ac.RegistryToken == "" && ac.Auth == "" {
		return "", nil
	}
	return registry.EncodeAuthConfig(registry.AuthConfig{
		Username:      ac.Username,
		Password:      ac.Password,
		Auth:          ac.Auth,
		ServerAddress: ac.ServerAddress,
		IdentityToken: ac.IdentityToken,
		RegistryToken: ac.RegistryToken,
	})
}
