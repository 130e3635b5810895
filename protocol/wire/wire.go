// Package wire holds the messages of the harness protocol, version
// "hemra.protocol/1", as Go types. It has no dependencies beyond the
// standard library so that harness binaries (harnesskit) can share the
// exact types hemra decodes without linking hemra itself.
//
// Every message is one JSON object on one line, with a "type" field.
// Harness to hemra: hello, event, result. Hemra to harness: run.start,
// run.cancel. docs/protocol.md is the reference.
package wire

import "encoding/json"

// Version is the protocol version a harness names in its hello.
const Version = "hemra.protocol/1"

// Message types.
const (
	TypeHello     = "hello"
	TypeRunStart  = "run.start"
	TypeEvent     = "event"
	TypeResult    = "result"
	TypeRunCancel = "run.cancel"
)

// Event kinds.
const (
	KindMessage    = "message"
	KindToolCall   = "tool_call"
	KindToolResult = "tool_result"
	KindLog        = "log"
	KindUsage      = "usage"
)

// EventKinds lists every event kind, in documentation order.
var EventKinds = []string{KindMessage, KindToolCall, KindToolResult, KindLog, KindUsage}

// Result statuses.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// Envelope is the part every message shares; hemra decodes it first to
// dispatch on Type.
type Envelope struct {
	Type string `json:"type"`
}

// Hello is the harness's first line: it names the protocol it speaks.
type Hello struct {
	Type     string  `json:"type"` // "hello"
	Protocol string  `json:"protocol"`
	Harness  Harness `json:"harness"`
}

// Harness names the harness program in its hello.
type Harness struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// Start is hemra's run.start: everything the harness needs to do one
// attempt. It never carries a secret: credentials reach a harness only as
// environment variables it declared by name.
type Start struct {
	Type     string          `json:"type"` // "run.start"
	Protocol string          `json:"protocol"`
	Task     Task            `json:"task"`
	Run      RunContext      `json:"run"`
	Args     json.RawMessage `json:"args,omitempty"` // the harness block's args, as JSON
	Paths    Paths           `json:"paths"`
	// MCP lists the MCP servers of this attempt (revision 2 of the
	// protocol; absent when there are none).
	MCP []MCPServer `json:"mcp,omitempty"`
}

// MCPServer is one MCP server the harness's agent may use. A stdio server
// is reached by running Command (hemra's connector) as the MCP client's
// stdio server, or by connecting to Socket directly; a URL server of a
// compose task is reached at URL as Harbor arranges it.
type MCPServer struct {
	Name string `json:"name"`
	// Source is "harness" (an mcp block: runs on the host) or "task" (the
	// task's [[environment.mcp_servers]]).
	Source string `json:"source"`
	// Transport is what the agent speaks: "stdio" through Command, or the
	// task's "sse" / "streamable-http" at URL.
	Transport string   `json:"transport"`
	Command   []string `json:"command,omitempty"`
	Socket    string   `json:"socket,omitempty"`
	URL       string   `json:"url,omitempty"`
}

// Task is the task handed to the harness.
type Task struct {
	ID string `json:"id"`
	// Instruction is instruction.md for Harbor tasks ("" for JSONL tasks).
	Instruction string `json:"instruction,omitempty"`
	// Input is the JSONL line's input value (absent for Harbor tasks).
	Input    json.RawMessage `json:"input,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// RunContext says which attempt this is.
type RunContext struct {
	AttemptID  string `json:"attempt_id"`
	Address    string `json:"address"` // eval/harness/task#repetition
	Eval       string `json:"eval"`
	Harness    string `json:"harness"`
	Repetition int    `json:"repetition"`
	// Deadline is when hemra starts cancelling the harness, RFC 3339.
	Deadline string `json:"deadline"`
}

// Paths are the well-known folders as the harness sees them.
type Paths struct {
	Workdir   string `json:"workdir"`
	Artifacts string `json:"artifacts"`
	AgentLogs string `json:"agent_logs"`
}

// Event is one thing that happened during the attempt. Data's shape
// depends on Kind (see the *Data types).
type Event struct {
	Type string          `json:"type"` // "event"
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data,omitempty"`
}

// MessageData is the data of a "message" event.
type MessageData struct {
	Role    string `json:"role"` // assistant | user | system
	Content string `json:"content"`
}

// ToolCallData is the data of a "tool_call" event.
type ToolCallData struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Input any    `json:"input,omitempty"`
}

// ToolResultData is the data of a "tool_result" event.
type ToolResultData struct {
	ID      string `json:"id"`
	Output  any    `json:"output,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
}

// LogData is the data of a "log" event.
type LogData struct {
	Level   string `json:"level"` // debug | info | warn | error
	Message string `json:"message"`
}

// Usage is model usage and cost: the data of a "usage" event (one model
// call or a running total) and the result's total.
type Usage struct {
	Model        string  `json:"model,omitempty"`
	InputTokens  int64   `json:"input_tokens,omitempty"`
	OutputTokens int64   `json:"output_tokens,omitempty"`
	CacheTokens  int64   `json:"cache_tokens,omitempty"`
	CostUSD      float64 `json:"cost_usd,omitempty"`
}

// Result is the harness's last message: exactly one per attempt.
type Result struct {
	Type   string          `json:"type"` // "result"
	Status string          `json:"status"`
	Output json.RawMessage `json:"output,omitempty"` // the harness's final answer (JSONL tasks compare it with target)
	Usage  json.RawMessage `json:"usage,omitempty"`  // a Usage object
	Error  string          `json:"error,omitempty"`  // when Status is "error"
}

// Cancel is hemra's run.cancel: stop soon, send a result, exit.
type Cancel struct {
	Type   string `json:"type"` // "run.cancel"
	Reason string `json:"reason"`
}
