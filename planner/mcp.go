package planner

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/hemra-dev/hemra/config"
	"github.com/hemra-dev/hemra/dataset"
)

// checkTaskMCP refuses a task whose MCP servers hemra cannot give its
// agent: tables Harbor itself would refuse, and a URL server (sse,
// streamable-http) outside a compose environment, which is the only place
// Harbor's arrangement puts one within the agent's reach (the agent's
// sandbox has no network otherwise). A stdio server runs where the agent
// runs and is always given.
func (p *planner) checkTaskMCP(t *dataset.Task, e *config.Eval) {
	servers, err := dataset.MCPServersOf(t)
	subject := &hcl.Range{Filename: p.taskFile(t, "task.toml")}
	if err != nil {
		p.errorf(subject, "Invalid MCP server in a task", "Task %q of dataset %q: %v.", t.Name, e.Dataset.Name, err)
		return
	}
	if t.HasCompose() {
		return
	}
	for _, m := range servers {
		if m.Transport == "stdio" {
			continue
		}
		p.errorf(subject, "Task MCP server out of the agent's reach",
			"Task %q of dataset %q declares the %s MCP server %q at %s. hemra gives an agent a URL server only as a service of the task's compose environment, as Harbor arranges it, and this task has none: its agent could not reach the server. Exclude the task (exclude = [%q]) or declare the server with transport = \"stdio\" and its command.",
			t.Name, e.Dataset.Name, m.Transport, m.Name, m.URL, t.Name)
	}
}

// mcpLoosenings are a harness's MCP servers as what they are for the
// attempt's isolation: programs on this host with the operator's access,
// which the agent can use whatever its sandbox blocks. They are recorded
// with the sandbox's loosenings, so a plan and a stored attempt show them
// and a plan that adds one flags it.
func mcpLoosenings(h *config.Harness) []string {
	var out []string
	for _, m := range h.MCP {
		out = append(out, fmt.Sprintf("mcp %q runs on this host with the operator's access (%s)", m.Name, strings.Join(m.Argv(), " ")))
	}
	return out
}
