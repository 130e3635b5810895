package planner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/compose-spec/compose-go/v2/interpolation"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/tree"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/hashicorp/hcl/v2"

	"github.com/hemra-dev/hemra/dataset"
	"github.com/hemra-dev/hemra/sandbox"
)

// A Harbor task's compose environment is environment/docker-compose.yaml
// merged over Harbor's base (environments/docker/docker-compose-build.yaml
// or -prebuilt.yaml: service main, built from environment/ or the
// docker_image, command sh -c "sleep infinity"), read with compose-go as
// docker compose reads it. What hemra runs of it is the attributes below
// (docs/docker.md lists them); any other attribute is a problem of the
// task, named by its key.
var composeSupported = []tree.Path{
	"name",
	"services.*.image", "services.*.pull_policy", "services.*.platform",
	"services.*.build", "services.*.build.context", "services.*.build.dockerfile",
	"services.*.build.args", "services.*.build.args.*",
	"services.*.command", "services.*.entrypoint",
	"services.*.environment", "services.*.environment.*",
	"services.*.working_dir", "services.*.user", "services.*.hostname",
	"services.*.healthcheck", "services.*.healthcheck.test", "services.*.healthcheck.interval",
	"services.*.healthcheck.timeout", "services.*.healthcheck.retries", "services.*.healthcheck.start_period",
	"services.*.healthcheck.start_interval", "services.*.healthcheck.disable",
	"services.*.depends_on", "services.*.depends_on.*", "services.*.depends_on.*.condition",
	"services.*.depends_on.*.required", "services.*.depends_on.*.restart",
	"services.*.expose", "services.*.expose.[]",
	"services.*.labels", "services.*.labels.*",
	"services.*.tmpfs", "services.*.tmpfs.[]",
	"services.*.volumes", "services.*.volumes.[]", "services.*.volumes.[].type", "services.*.volumes.[].source",
	"services.*.volumes.[].target", "services.*.volumes.[].read_only", "services.*.volumes.[].volume",
	"services.*.volumes.[].volume.nocopy", "services.*.volumes.[].bind", "services.*.volumes.[].bind.create_host_path",
	"services.*.deploy", "services.*.deploy.resources", "services.*.deploy.resources.limits",
	"services.*.deploy.resources.limits.cpus", "services.*.deploy.resources.limits.memory",
	"services.*.cpus", "services.*.mem_limit",
	"services.*.init", "services.*.read_only", "services.*.stop_grace_period",
	"services.*.networks", "services.*.networks.*",
	"volumes", "volumes.*", "volumes.*.name",
	"networks", "networks.default",
}

// composeParse is a compose environment read once per task folder.
type composeParse struct {
	compose *sandbox.Compose
	// refs are the images it names and its builds' FROM lines, for image
	// resolution; problems why it cannot run.
	refs     []composeRef
	problems []string
}

type composeRef struct {
	service string
	ref     string
	file    string // relative to the task folder: the compose file or a Dockerfile
}

var composeCache sync.Map // task dir + compose sha → *composeParse

// parseCompose reads a task's compose environment (nil when it has none).
func parseCompose(t *dataset.Task) *composeParse {
	if !t.HasCompose() {
		return nil
	}
	var sha string
	for _, f := range t.Environment {
		if f.Path == "environment/docker-compose.yaml" {
			sha = f.SHA256
		}
	}
	key := t.Dir + "\x00" + sha
	if v, ok := composeCache.Load(key); ok {
		return v.(*composeParse)
	}
	cp := loadCompose(t)
	composeCache.Store(key, cp)
	return cp
}

func loadCompose(t *dataset.Task) *composeParse {
	cp := &composeParse{}
	fail := func(format string, args ...any) *composeParse {
		cp.problems = append(cp.problems, fmt.Sprintf(format, args...))
		return cp
	}
	envDir := filepath.Join(t.Dir, "environment")
	src, err := os.ReadFile(filepath.Join(envDir, "docker-compose.yaml"))
	if err != nil {
		return fail("environment/docker-compose.yaml: %v", err)
	}
	cfg := t.Config
	if cfg == nil {
		cfg = &dataset.TaskConfig{}
	}
	// Harbor's base: main built from environment/ or run from docker_image.
	mainBase := map[string]any{"command": []any{"sh", "-c", "sleep infinity"}}
	if img := cfg.Environment.DockerImage; img != "" {
		mainBase["image"] = img
	} else {
		mainBase["build"] = map[string]any{"context": envDir}
	}
	base := map[string]any{"services": map[string]any{"main": mainBase}}
	// The variables Harbor gives the compose file, and [environment.env]'s
	// literal values; nothing else of the host is read (a ${NAME:-x}
	// takes its default).
	vars := map[string]string{"CONTEXT_DIR": envDir, "MAIN_IMAGE_NAME": "hemra-main", "PREBUILT_IMAGE_NAME": cfg.Environment.DockerImage}
	for k, v := range cfg.Environment.Env {
		if _, _, _, tmpl := dataset.EnvTemplate(v); !tmpl {
			vars[k] = v
		}
	}
	var unsupported []loader.UnsupportedAttribute
	project, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir: envDir,
		ConfigFiles: []types.ConfigFile{
			{Filename: "harbor-base.yaml", Config: base},
			{Filename: filepath.Join(envDir, "docker-compose.yaml"), Content: src},
		},
		Environment: types.Mapping(vars),
	}, func(o *loader.Options) {
		o.SetProjectName("hemra", true)
		o.SkipInclude = true
		o.SkipResolveEnvironment = false
		o.Interpolate = &interpolation.Options{LookupValue: func(k string) (string, bool) {
			v, ok := vars[k]
			return v, ok || true // an unset variable is empty, as compose has it
		}}
		o.ResourceLoaders = nil
	}, loader.WithDiscardEnvFiles, loader.WithSupportedAttributes(composeSupported, func(u []loader.UnsupportedAttribute) {
		unsupported = append(unsupported, u...)
	}))
	if err != nil {
		return fail("environment/docker-compose.yaml does not load: %v", err)
	}
	if len(unsupported) > 0 {
		var keys []string
		for _, u := range unsupported {
			if k := string(u.Path); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		return fail("environment/docker-compose.yaml uses %s, which hemra's compose runtime does not support (docs/docker.md lists what it does)", strings.Join(keys, ", "))
	}
	for name := range project.Networks {
		if name != "default" {
			return fail("environment/docker-compose.yaml: network %q: services share one private network per attempt, the default one", name)
		}
	}
	c := &sandbox.Compose{}
	for name := range project.Volumes {
		c.Volumes = append(c.Volumes, name)
	}
	sort.Strings(c.Volumes)
	order, err := composeOrder(project)
	if err != nil {
		return fail("environment/docker-compose.yaml: %v", err)
	}
	for _, name := range order {
		s := project.Services[name]
		cs, refs, err := composeService(t, envDir, name, s)
		if err != nil {
			cp.problems = append(cp.problems, fmt.Sprintf("environment/docker-compose.yaml: service %s: %v", name, err))
			continue
		}
		cp.refs = append(cp.refs, refs...)
		if name == "main" {
			c.Main = cs
			continue
		}
		c.Services = append(c.Services, cs)
	}
	cp.compose = c
	return cp
}

// composeOrder lists the services so that each comes after those it
// depends on; main last of those it needs.
func composeOrder(p *types.Project) ([]string, error) {
	names := make([]string, 0, len(p.Services))
	for n := range p.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(n string, path []string) error
	visit = func(n string, path []string) error {
		switch state[n] {
		case 1:
			return fmt.Errorf("depends_on cycles: %s", strings.Join(append(path, n), " → "))
		case 2:
			return nil
		}
		s, ok := p.Services[n]
		if !ok {
			return fmt.Errorf("depends_on names %q, which is no service", n)
		}
		state[n] = 1
		deps := make([]string, 0, len(s.DependsOn))
		for d := range s.DependsOn {
			deps = append(deps, d)
		}
		sort.Strings(deps)
		for _, d := range deps {
			if err := visit(d, append(path, n)); err != nil {
				return err
			}
		}
		state[n] = 2
		out = append(out, n)
		return nil
	}
	for _, n := range names {
		if err := visit(n, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// composeService turns one compose service into what the provider runs.
func composeService(t *dataset.Task, envDir, name string, s types.ServiceConfig) (sandbox.ComposeService, []composeRef, error) {
	cs := sandbox.ComposeService{
		Name: name, Entrypoint: s.Entrypoint, Command: s.Command,
		WorkingDir: s.WorkingDir, User: s.User, Hostname: s.Hostname, ReadOnly: s.ReadOnly,
	}
	var refs []composeRef
	if p := s.Platform; p != "" && !strings.HasPrefix(p, "linux/") {
		return cs, nil, fmt.Errorf("platform %q is not a Linux one", p)
	}
	for k, v := range s.Environment {
		if cs.Env == nil {
			cs.Env = map[string]string{}
		}
		if v != nil {
			cs.Env[k] = *v
		} else {
			cs.Env[k] = ""
		}
	}
	switch {
	case name == "main":
		// main's image is the task's (Settings.Image or Build); the base
		// names it, and a compose file may restate it.
		if b := s.Build; b != nil && (filepath.Clean(b.Context) != envDir || b.Dockerfile != "" && b.Dockerfile != "Dockerfile") {
			return cs, nil, fmt.Errorf("main is built from %s; hemra builds main from environment/Dockerfile only", b.Context)
		}
		if s.Image != "" && s.Image != "hemra-main" && s.Image != t.Config.Environment.DockerImage && s.Build == nil {
			return cs, nil, fmt.Errorf("main runs image %s; give the task [environment] docker_image = %q instead", s.Image, s.Image)
		}
	case s.Build != nil:
		b := s.Build
		ctx := filepath.Clean(b.Context)
		rel, err := filepath.Rel(filepath.Join(t.Dir), ctx)
		if err != nil || !strings.HasPrefix(filepath.ToSlash(rel)+"/", "environment/") {
			return cs, nil, fmt.Errorf("build context %s is outside the task's environment/", b.Context)
		}
		relCtx := filepath.ToSlash(rel)
		dockerfile := b.Dockerfile
		if dockerfile == "" {
			dockerfile = "Dockerfile"
		}
		if strings.Contains(dockerfile, "..") || filepath.IsAbs(dockerfile) {
			return cs, nil, fmt.Errorf("dockerfile %s is outside its build context", dockerfile)
		}
		df, err := os.ReadFile(filepath.Join(ctx, dockerfile))
		if err != nil {
			return cs, nil, fmt.Errorf("build: %v", err)
		}
		build := &sandbox.Build{Context: ctx, Dockerfile: dockerfile, From: map[string]string{}}
		for k, v := range b.Args {
			if build.Args == nil {
				build.Args = map[string]string{}
			}
			if v != nil {
				build.Args[k] = *v
			}
		}
		for _, f := range dataset.DockerfileFroms(df) {
			if f.Err != "" {
				return cs, nil, fmt.Errorf("%s/%s: %s", relCtx, dockerfile, f.Err)
			}
			refs = append(refs, composeRef{service: name, ref: f.Ref, file: relCtx + "/" + dockerfile})
		}
		cs.Build = build
	case s.Image != "":
		cs.Image = s.Image
		refs = append(refs, composeRef{service: name, ref: s.Image, file: "environment/docker-compose.yaml"})
	default:
		return cs, nil, fmt.Errorf("it has neither image nor build")
	}
	if h := s.HealthCheck; h != nil {
		ch := &sandbox.ComposeHealth{Test: h.Test, Disable: h.Disable}
		dur := func(d *types.Duration) time.Duration {
			if d == nil {
				return 0
			}
			return time.Duration(*d)
		}
		ch.Interval, ch.Timeout, ch.StartPeriod, ch.StartInterval = dur(h.Interval), dur(h.Timeout), dur(h.StartPeriod), dur(h.StartInterval)
		if h.Retries != nil {
			ch.Retries = int(*h.Retries)
		}
		cs.Health = ch
	}
	deps := make([]string, 0, len(s.DependsOn))
	for d := range s.DependsOn {
		deps = append(deps, d)
	}
	sort.Strings(deps)
	for _, d := range deps {
		cond := s.DependsOn[d].Condition
		switch cond {
		case "", types.ServiceConditionStarted:
			cond = types.ServiceConditionStarted
		case types.ServiceConditionHealthy, types.ServiceConditionCompletedSuccessfully:
		default:
			return cs, nil, fmt.Errorf("depends_on %s: condition %q", d, cond)
		}
		cs.DependsOn = append(cs.DependsOn, sandbox.ComposeDependsOn{Service: d, Condition: cond})
	}
	cs.Tmpfs = append(cs.Tmpfs, s.Tmpfs...)
	for _, v := range s.Volumes {
		switch v.Type {
		case types.VolumeTypeVolume:
			if v.Source == "" {
				return cs, nil, fmt.Errorf("an anonymous volume at %s: name it in the file's volumes", v.Target)
			}
			cs.Volumes = append(cs.Volumes, sandbox.ComposeVolume{Type: "volume", Source: v.Source, Target: v.Target, ReadOnly: v.ReadOnly})
		case types.VolumeTypeBind:
			rel, err := filepath.Rel(envDir, filepath.Clean(v.Source))
			if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
				return cs, nil, fmt.Errorf("bind mount %s is outside the task's environment/ (a task may only bind its own files)", v.Source)
			}
			// A task's files are bound read-only: the attempt cannot
			// change the task folder.
			cs.Volumes = append(cs.Volumes, sandbox.ComposeVolume{Type: "bind", Source: filepath.Clean(v.Source), Target: v.Target, ReadOnly: true})
		case types.VolumeTypeTmpfs:
			cs.Tmpfs = append(cs.Tmpfs, v.Target)
		default:
			return cs, nil, fmt.Errorf("volume type %q", v.Type)
		}
	}
	if d := s.Deploy; d != nil && d.Resources.Limits != nil {
		cs.CPUs = float64(d.Resources.Limits.NanoCPUs)
		cs.Memory = int64(d.Resources.Limits.MemoryBytes)
	}
	if s.CPUS > 0 {
		cs.CPUs = float64(s.CPUS)
	}
	if s.MemLimit > 0 {
		cs.Memory = int64(s.MemLimit)
	}
	return cs, refs, nil
}

// composeImageRefs are the images a task's compose environment uses
// beside main's: for CollectImages.
func composeImageRefs(t *dataset.Task) []fromLine {
	cp := parseCompose(t)
	if cp == nil {
		return nil
	}
	out := make([]fromLine, 0, len(cp.refs))
	for _, r := range cp.refs {
		out = append(out, fromLine{ref: r.ref, file: r.file})
	}
	return out
}

// composeSettings pins a compose environment's images and build hashes,
// or says why it cannot run.
func (p *planner) composeSettings(t *dataset.Task) (*sandbox.Compose, []string) {
	cp := parseCompose(t)
	if cp == nil {
		return nil, nil
	}
	if len(cp.problems) > 0 {
		return nil, cp.problems
	}
	by := "dataset task " + t.Name
	c := *cp.compose
	c.Services = slices.Clone(c.Services)
	var problems []string
	pins := map[string]string{}
	for _, r := range cp.refs {
		d, ok := p.resolve(r.ref, by, func() *hcl.Range { return &hcl.Range{Filename: p.taskFile(t, r.file)} })
		if !ok {
			problems = append(problems, fmt.Sprintf("service %s: image %s is not resolved", r.service, r.ref))
			continue
		}
		pins[r.ref] = pinned(r.ref, d)
	}
	for i := range c.Services {
		s := &c.Services[i]
		if s.Image != "" {
			s.Image = pins[s.Image]
		}
		if b := s.Build; b != nil {
			nb := *b
			nb.From = map[string]string{}
			for _, r := range cp.refs {
				if r.service == s.Name && r.file != "environment/docker-compose.yaml" {
					nb.From[r.ref] = pins[r.ref]
				}
			}
			rel, _ := filepath.Rel(t.Dir, nb.Context)
			prefix := filepath.ToSlash(rel) + "/"
			var files []dataset.File
			for _, f := range t.Environment {
				if strings.HasPrefix(f.Path, prefix) {
					f.Path = strings.TrimPrefix(f.Path, prefix)
					files = append(files, f)
				}
			}
			h := sha256.New()
			fmt.Fprintf(h, "%s\x00%s\n", buildHash(files, nb.From), nb.Dockerfile)
			args := make([]string, 0, len(nb.Args))
			for k, v := range nb.Args {
				args = append(args, k+"="+v)
			}
			sort.Strings(args)
			fmt.Fprintf(h, "%v\n", args)
			nb.Hash = "sha256:" + hex.EncodeToString(h.Sum(nil))
			s.Build = &nb
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return &c, nil
}
