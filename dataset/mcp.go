package dataset

import (
	"fmt"
	"strings"
)

// MCPServer is one [[environment.mcp_servers]] table of a Harbor task,
// read as Harbor's MCPServerConfig reads it: transport defaults to "sse",
// "http" means "streamable-http", a URL transport needs url, stdio needs
// command. Harbor hands these to the agent; a stdio server's command runs
// where the agent runs (inside the task's environment).
type MCPServer struct {
	Name      string
	Transport string // stdio | sse | streamable-http
	URL       string
	Command   string
	Args      []string
}

// Argv is a stdio server's command line.
func (m MCPServer) Argv() []string { return append([]string{m.Command}, m.Args...) }

// MCPServersOf reads a task's [[environment.mcp_servers]]. A later table
// with the name of an earlier one replaces it, as in Harbor.
func MCPServersOf(t *Task) ([]MCPServer, error) {
	if t == nil || t.Config == nil {
		return nil, nil
	}
	var out []MCPServer
	index := map[string]int{}
	for i, raw := range t.Config.Environment.MCPServers {
		m, err := mcpServer(raw)
		if err != nil {
			return nil, fmt.Errorf("task.toml [[environment.mcp_servers]] #%d: %v", i+1, err)
		}
		if j, ok := index[m.Name]; ok {
			out[j] = m
			continue
		}
		index[m.Name] = len(out)
		out = append(out, m)
	}
	return out, nil
}

func mcpServer(raw map[string]any) (MCPServer, error) {
	var m MCPServer
	str := func(k string) (string, error) {
		v, ok := raw[k]
		if !ok || v == nil {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s must be a string", k)
		}
		return s, nil
	}
	var err error
	if m.Name, err = str("name"); err != nil {
		return m, err
	}
	if m.Name == "" {
		return m, fmt.Errorf("name is required")
	}
	if strings.ContainsAny(m.Name, "/\x00") {
		return m, fmt.Errorf("name %q may not hold a slash", m.Name)
	}
	if m.Transport, err = str("transport"); err != nil {
		return m, err
	}
	switch m.Transport {
	case "":
		m.Transport = "sse"
	case "http":
		m.Transport = "streamable-http"
	case "stdio", "sse", "streamable-http":
	default:
		return m, fmt.Errorf("server %q: transport %q is not stdio, sse or streamable-http", m.Name, m.Transport)
	}
	if m.URL, err = str("url"); err != nil {
		return m, err
	}
	if m.Command, err = str("command"); err != nil {
		return m, err
	}
	if v, ok := raw["args"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			return m, fmt.Errorf("server %q: args must be a list of strings", m.Name)
		}
		for _, a := range list {
			s, ok := a.(string)
			if !ok {
				return m, fmt.Errorf("server %q: args must be a list of strings", m.Name)
			}
			m.Args = append(m.Args, s)
		}
	}
	switch {
	case m.Transport == "stdio" && m.Command == "":
		return m, fmt.Errorf("server %q: 'command' is required for transport 'stdio'", m.Name)
	case m.Transport != "stdio" && m.URL == "":
		return m, fmt.Errorf("server %q: 'url' is required for transport '%s'", m.Name, m.Transport)
	}
	return m, nil
}
