package state

import (
	"encoding/json"
	"time"
)

// Status is where an attempt is in its life.
type Status string

const (
	StatusPending     Status = "pending"  // recorded, not started
	StatusAgent       Status = "agent"    // agent stage running
	StatusVerify      Status = "verify"   // verify stage running
	StatusJudge       Status = "judge"    // judge stage running
	StatusFinished    Status = "finished" // all stages ended (a task failure is finished)
	StatusErrored     Status = "errored"  // ended in an infrastructure error
	StatusInterrupted Status = "interrupted"
)

// Terminal reports whether no further transition is expected.
func (s Status) Terminal() bool {
	return s == StatusFinished || s == StatusErrored || s == StatusInterrupted
}

// Class classifies how an attempt ended.
type Class string

const (
	ClassPassed        Class = "passed"         // reward >= 1
	ClassTaskFailure   Class = "task_failure"   // reward < 1: a result, not an error
	ClassAgentTimeout  Class = "agent_timeout"  // agent hit its deadline; still verified
	ClassProtocolError Class = "protocol_error" // harness broke the protocol
	ClassVerifierError Class = "verifier_error" // no or malformed reward
	ClassInfraError    Class = "infra_error"    // sandbox could not start, disk full, ...
	ClassInterrupted   Class = "interrupted"    // cancelled by the operator or a crash
)

// Retryable reports whether the next plan retries an attempt of this class.
func (c Class) Retryable() bool { return c == ClassInfraError || c == ClassInterrupted }

// Attempt is one recorded attempt. Attempts are append-only: a re-run adds
// a new Attempt that becomes its address's current one.
type Attempt struct {
	ID          string       `json:"id"` // sortable, unique in the store
	Address     string       `json:"address"`
	RunID       string       `json:"run_id"`
	Manifest    Manifest     `json:"manifest"`
	Transitions []Transition `json:"transitions"`
	Outcome     *Outcome     `json:"outcome,omitempty"`
	// Origin is set on an attempt imported from elsewhere (a Harbor job):
	// such attempts are read-only, kept in their own address index and
	// never planned.
	Origin *Origin `json:"origin,omitempty"`
}

// Origin says where an imported attempt came from.
type Origin struct {
	Format     string    `json:"format"`             // "harbor"
	Job        string    `json:"job,omitempty"`      // the Harbor job's name (its folder)
	JobID      string    `json:"job_id,omitempty"`   // the job's id in its result.json
	Trial      string    `json:"trial,omitempty"`    // the trial's name (its folder)
	TrialID    string    `json:"trial_id,omitempty"` // the trial's id in its result.json
	Source     string    `json:"source,omitempty"`   // the folder imported, as given
	ImportedAt time.Time `json:"imported_at"`
}

// Status is the attempt's latest status.
func (a *Attempt) Status() Status {
	if len(a.Transitions) == 0 {
		return StatusPending
	}
	return a.Transitions[len(a.Transitions)-1].Status
}

// Transition is one status change.
type Transition struct {
	Status Status    `json:"status"`
	At     time.Time `json:"at"`
	Note   string    `json:"note,omitempty"`
}

// Manifest is everything that went into an attempt: its fingerprints and
// the inputs behind them, so that a later plan can explain what changed
// without the old files on disk. Never a secret value.
type Manifest struct {
	FormatVersion int    `json:"format_version"`
	Eval          string `json:"eval"`
	Harness       string `json:"harness"`
	Task          string `json:"task"`
	Repetition    int    `json:"repetition"`

	AgentFingerprint  string `json:"agent_fingerprint"`
	VerifyFingerprint string `json:"verify_fingerprint"`
	JudgeFingerprint  string `json:"judge_fingerprint"`

	// Inputs maps attribute paths ("harness.args.model",
	// "task.instruction.md", "sandbox.image") to a canonical value: the
	// literal for small values, "sha256:<hex>" for file contents. Stage
	// says which fingerprint each input belongs to.
	Inputs []Input `json:"inputs"`

	Images   map[string]string `json:"images,omitempty"` // reference -> digest
	Sandbox  SandboxRecord     `json:"sandbox"`
	EnvNames []string          `json:"env_names,omitempty"`

	// ReusedAgentFrom is the attempt whose agent outcome a re-verify or
	// re-judge reused.
	ReusedAgentFrom string `json:"reused_agent_from,omitempty"`
}

// Input is one fingerprinted input. For text files, Blob names the blob
// holding the content so plan can show a unified diff later.
type Input struct {
	Stage string `json:"stage"` // agent | verify | judge
	Path  string `json:"path"`
	Value string `json:"value"`
	Blob  string `json:"blob,omitempty"` // sha256 hex of the content blob
}

// SandboxRecord is the isolation an attempt actually ran with.
type SandboxRecord struct {
	Kind       string          `json:"kind"`
	Settings   json.RawMessage `json:"settings,omitempty"`
	Loosenings []string        `json:"loosenings,omitempty"`
	Required   []string        `json:"required,omitempty"`
	Offered    []string        `json:"offered,omitempty"`
}

// Outcome is how an attempt ended.
type Outcome struct {
	Class      Class              `json:"class"`
	Reward     *float64           `json:"reward,omitempty"`
	Rewards    map[string]float64 `json:"rewards,omitempty"`
	Error      string             `json:"error,omitempty"`
	StartedAt  time.Time          `json:"started_at"`
	FinishedAt time.Time          `json:"finished_at"`
	// AgentExit and AgentResult come from the harness's result message.
	AgentExit   int             `json:"agent_exit,omitempty"`
	AgentResult json.RawMessage `json:"agent_result,omitempty"`
	Usage       json.RawMessage `json:"usage,omitempty"`
	Artifacts   []Artifact      `json:"artifacts,omitempty"`
	StderrTail  string          `json:"stderr_tail,omitempty"`
	EventsLog   string          `json:"events_log,omitempty"` // path relative to the store
	EventCount  int             `json:"event_count,omitempty"`
	// Snapshot is the provider's reference to the agent's filesystem
	// snapshot, kept so a later re-verify can reuse it.
	Snapshot string                `json:"snapshot,omitempty"`
	Judges   map[string]JudgeScore `json:"judges,omitempty"`
}

// Artifact is one file a harness left in its artifact folder.
type Artifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// JudgeScore is one judge's verdict.
type JudgeScore struct {
	Score float64 `json:"score"`
	Model string  `json:"model,omitempty"`
	Error string  `json:"error,omitempty"`
}

// Current is the compact per-address summary plan reads for every declared
// attempt. It is kept in its own bucket so a no-op plan over 100,000
// attempts never decodes a full manifest.
type Current struct {
	AttemptID         string `json:"a"`
	AgentFingerprint  string `json:"f"`
	VerifyFingerprint string `json:"v"`
	JudgeFingerprint  string `json:"j"`
	Status            Status `json:"s"`
	Class             Class  `json:"c,omitempty"`
	// SnapshotKept is false once the agent's snapshot is gone, so plan
	// upgrades a re-verify to a re-run.
	SnapshotKept bool `json:"k,omitempty"`
}

// Run is one `hemra apply`.
type Run struct {
	ID         string    `json:"id"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitempty"`
	Host       string    `json:"host"`
	PID        int       `json:"pid"`
	Status     string    `json:"status"` // running | finished | interrupted | errored | imported
	// Kind is "" for an apply run and "import" for a `hemra import`, whose
	// Source is the folder it read.
	Kind     string   `json:"kind,omitempty"`
	Source   string   `json:"source,omitempty"`
	Attempts []string `json:"attempts,omitempty"`
	Planned  int      `json:"planned"`
	// PlanSHA256 is the SHA-256 of the saved plan file the run applied
	// (hemra apply PLANFILE), "" for a run that planned itself: a plan file
	// applied once is recognised when it is applied again.
	PlanSHA256 string `json:"plan_sha256,omitempty"`
}
