package dataset

import "encoding/json"

// Task is one unit of work of a dataset: a Harbor-format task directory or
// one line of a JSONL file.
type Task struct {
	// Name is the task's id: the directory name for Harbor tasks, the `id`
	// field for JSONL lines. It is the last part of an attempt address.
	Name string
	// Kind is "harbor" or "jsonl".
	Kind string
	// Dir is the absolute task directory (Harbor tasks only). Never
	// fingerprinted: only file contents and relative paths are.
	Dir string

	// Harbor tasks.
	Config      *TaskConfig // parsed task.toml
	Instruction []byte      // instruction.md, as stored (CRLF kept)
	// Files lists every file of the task directory relative to Dir, with
	// slash separators, sorted, with the SHA-256 of its content. Hidden and
	// binary files included. Grouped by role so fingerprints can pick the
	// parts that belong to each stage.
	Environment []File // environment/**
	Tests       []File // tests/**
	Solution    []File // solution/**
	Steps       []Step // steps/<name>/** for multi-step tasks
	Other       []File // everything else (task.toml, instruction.md, ...)

	// JSONL tasks.
	Input    json.RawMessage
	Target   json.RawMessage
	Metadata json.RawMessage
	Line     int // 1-based line number in the JSONL file
}

// File is one file of a task directory.
type File struct {
	Path   string // relative to the task directory, slash-separated
	SHA256 string // hex
	Size   int64
	Mode   uint32 // only the executable bit is kept (0o755 or 0o644)
}

// Step is one step of a multi-step task.
type Step struct {
	Name        string
	Instruction []byte
	Files       []File
}

// TaskConfig is task.toml. Every section Harbor defines is parsed; keys
// hemra does not know are kept in Extra so nothing is lost.
type TaskConfig struct {
	SchemaVersion string         `json:"schema_version,omitempty"`
	Version       string         `json:"version,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	Agent         AgentConfig    `json:"agent"`
	Verifier      VerifierConfig `json:"verifier"`
	Environment   EnvConfig      `json:"environment"`
	Steps         []StepConfig   `json:"steps,omitempty"`
	// Extra holds unknown top-level keys and unknown keys of known
	// sections ("environment.foo"), as decoded TOML values.
	Extra map[string]any `json:"extra,omitempty"`
}

// AgentConfig is task.toml's [agent].
type AgentConfig struct {
	TimeoutSec float64           `json:"timeout_sec,omitempty"`
	User       string            `json:"user,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
}

// VerifierConfig is task.toml's [verifier].
type VerifierConfig struct {
	TimeoutSec  float64           `json:"timeout_sec,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	User        string            `json:"user,omitempty"`
	Environment *EnvConfig        `json:"environment,omitempty"` // [verifier.environment]
}

// EnvConfig is task.toml's [environment].
type EnvConfig struct {
	DockerImage    string            `json:"docker_image,omitempty"`
	CPUs           float64           `json:"cpus,omitempty"`
	MemoryMB       int64             `json:"memory_mb,omitempty"`
	StorageMB      int64             `json:"storage_mb,omitempty"`
	GPUs           int               `json:"gpus,omitempty"`
	GPUTypes       []string          `json:"gpu_types,omitempty"`
	AllowInternet  *bool             `json:"allow_internet,omitempty"`
	Workdir        string            `json:"workdir,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	MCPServers     []map[string]any  `json:"mcp_servers,omitempty"`
	BuildTimeoutSec float64          `json:"build_timeout_sec,omitempty"`
}

// StepConfig is one [[steps]] entry.
type StepConfig struct {
	Name     string         `json:"name"`
	Agent    *AgentConfig   `json:"agent,omitempty"`
	Verifier *VerifierConfig `json:"verifier,omitempty"`
	Extra    map[string]any `json:"extra,omitempty"`
}

// HasDockerfile reports whether the task builds its image from
// environment/Dockerfile.
func (t *Task) HasDockerfile() bool {
	for _, f := range t.Environment {
		if f.Path == "environment/Dockerfile" {
			return true
		}
	}
	return false
}

// HasCompose reports whether the task declares a docker-compose environment.
func (t *Task) HasCompose() bool {
	for _, f := range t.Environment {
		switch f.Path {
		case "environment/docker-compose.yaml", "environment/docker-compose.yml", "environment/compose.yaml", "environment/compose.yml":
			return true
		}
	}
	return false
}
