package main

import (
	"fmt"
	"io"
	"os/user"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hemra-dev/hemra/config"
	"github.com/hemra-dev/hemra/internal/sandboxbin"
	"github.com/hemra-dev/hemra/mcprelay"
)

// doctorMCP is one MCP server the eval directory would run on this host.
type doctorMCP struct {
	Harness string   `json:"harness"`
	Server  string   `json:"server"`
	Command []string `json:"command"`
	Env     []string `json:"env"` // names only
}

// doctorMCPReport is doctor's MCP section: the servers that would run on
// the host, what a killed hemra left running, and where hemra's own
// in-sandbox programs come from.
type doctorMCPReport struct {
	// HostAccess says plainly what the servers can do.
	HostAccess string              `json:"host_access,omitempty"`
	Servers    []doctorMCP         `json:"servers"`
	Leftovers  []mcprelay.Leftover `json:"leftovers"`
	Programs   []doctorProgram     `json:"sandbox_programs"`
	Pruned     []mcprelay.Leftover `json:"pruned,omitempty"`
	PruneError string              `json:"prune_error,omitempty"`
}

type doctorProgram struct {
	sandboxbin.Status
	Platform string `json:"platform"`
}

func mcpDoctor(g *Globals, prune bool) *doctorMCPReport {
	rep := &doctorMCPReport{Servers: []doctorMCP{}, Leftovers: []mcprelay.Leftover{}}
	if cfg := loadForDoctor(g); cfg != nil {
		names := make([]string, 0, len(cfg.Harnesses))
		for n := range cfg.Harnesses {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			for _, m := range cfg.Harnesses[n].MCP {
				env := append([]string{}, m.Env...)
				rep.Servers = append(rep.Servers, doctorMCP{Harness: n, Server: m.Name, Command: m.Argv(), Env: env})
			}
		}
	}
	if len(rep.Servers) > 0 {
		who := "the user running hemra"
		if u, err := user.Current(); err == nil {
			who = u.Username
		}
		rep.HostAccess = fmt.Sprintf("they run on this host as %s, outside any sandbox, with that user's access to this machine's files and network, whatever the sandbox of the agent isolates; run only servers you would run yourself", who)
	}
	if ls, err := mcprelay.Leftovers(""); err == nil && ls != nil {
		rep.Leftovers = ls
	}
	if prune && len(rep.Leftovers) > 0 {
		if err := mcprelay.RemoveLeftovers(rep.Leftovers); err != nil {
			rep.PruneError = err.Error()
		}
		rep.Pruned, rep.Leftovers = rep.Leftovers, []mcprelay.Leftover{}
	}
	// Containers run linux programs; the local sandbox this machine's own.
	plats := []sandboxbin.Platform{sandboxbin.Linux()}
	if h := sandboxbin.Host(); h != plats[0] {
		plats = append(plats, h)
	}
	loc := sandboxbin.Default()
	for _, name := range sandboxbin.Names() {
		for _, p := range plats {
			rep.Programs = append(rep.Programs, doctorProgram{Status: loc.Status(name, p), Platform: p.String()})
		}
	}
	return rep
}

// loadForDoctor reads the eval directory's configuration without its
// tasks, or nil when there is none or it has errors (doctor reports those
// once, with the sandboxes).
func loadForDoctor(g *Globals) *config.Config {
	if m, _ := filepath.Glob(filepath.Join(g.Dir, "*.hcl")); len(m) == 0 {
		return nil
	}
	cfg, diags := config.Load(g.Dir, config.LoadOptions{Environ: g.Environ, SkipTasks: true})
	if diags.HasErrors() {
		return nil
	}
	return cfg
}

func printMCPDoctor(w io.Writer, rep *doctorMCPReport) {
	if rep == nil {
		return
	}
	if len(rep.Servers) > 0 {
		fmt.Fprintf(w, "\nMCP servers hemra would run on this host, one per attempt (%s):\n", rep.HostAccess)
		for _, s := range rep.Servers {
			env := ""
			if len(s.Env) > 0 {
				env = " (env " + strings.Join(s.Env, ", ") + ")"
			}
			fmt.Fprintf(w, "  harness.%s mcp %q: %s%s\n", s.Harness, s.Server, strings.Join(s.Command, " "), env)
		}
	}
	for _, l := range rep.Leftovers {
		fmt.Fprintf(w, "\nLeft behind by a hemra that is gone: %s (attempt %s %s)\n", l.Dir, orDash(l.Attempt), l.Address)
		for _, s := range l.Servers {
			fmt.Fprintf(w, "  MCP server %q still running: process group %d, pids %s\n", s.Name, s.PGID, joinInts(s.PIDs))
		}
		fmt.Fprintln(w, "  hemra doctor -prune stops them and removes the folder.")
	}
	for _, l := range rep.Pruned {
		fmt.Fprintf(w, "\nRemoved MCP session folder %s (attempt %s)", l.Dir, orDash(l.Attempt))
		for _, s := range l.Servers {
			fmt.Fprintf(w, "; killed server %q (pids %s)", s.Name, joinInts(s.PIDs))
		}
		fmt.Fprintln(w)
	}
	if rep.PruneError != "" {
		fmt.Fprintf(w, "NOT removed: %s\n", rep.PruneError)
	}
	if len(rep.Programs) > 0 {
		fmt.Fprintln(w, "\nhemra's in-sandbox programs (docs/sandbox-programs.md):")
		for _, p := range rep.Programs {
			src := p.Source
			if src == "" {
				src = "MISSING"
			}
			fmt.Fprintf(w, "  %s %s: %s (%s)\n", p.Name, p.Platform, src, p.Detail)
		}
	}
}

func joinInts(l []int) string {
	s := make([]string, len(l))
	for i, n := range l {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, " ")
}
