package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"time"

	"github.com/hemra-dev/hemra/config"
	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/state"
)

// verifyStage scores the attempt: a Harbor task's tests/test.sh in a
// verifier instance started from the agent's snapshot, or a JSONL task's
// built-in comparison.
func (a *attemptRun) verifyStage(ctx context.Context) error {
	if a.j.task.Kind == "jsonl" {
		return a.verifyJSONL()
	}
	return a.verifyHarbor(ctx)
}

func (a *attemptRun) verifyJSONL() error {
	t := a.j.task
	if len(t.Target) == 0 || string(t.Target) == "null" {
		a.log.note("verify", "verify", "no target: not scored")
		return nil
	}
	if a.j.harness.Builtin == BuiltinNop {
		// nop gives no answer: a wrong one.
		zero := 0.0
		a.out.Reward, a.out.Rewards = &zero, map[string]float64{"reward": 0}
		return nil
	}
	r, err := comparisonFor(a.j.eval.Verifier).score(a.agentOutput, t.Target)
	if err != nil {
		return &stageError{state.ClassVerifierError, fmt.Sprintf("task %s (line %d): %v", t.Name, t.Line, err)}
	}
	a.out.Reward, a.out.Rewards = &r, map[string]float64{"reward": r}
	return nil
}

// verifierTimeout is the verifier block's timeout, else task.toml's
// [verifier] timeout_sec, else Harbor's 600 s.
func (j *job) verifierTimeout() time.Duration {
	if v := j.eval.Verifier; v != nil && v.Timeout > 0 {
		return v.Timeout
	}
	if j.task.Config != nil && j.task.Config.Verifier.TimeoutSec > 0 {
		return time.Duration(j.task.Config.Verifier.TimeoutSec * float64(time.Second))
	}
	return defaultVerifierTimeout
}

// verifierSettings are the agent's sandbox settings with the verifier's
// network: none unless the verifier block opens it.
func verifierSettings(s sandbox.Settings, v *config.Verifier) sandbox.Settings {
	s.Network = config.NetworkNone
	if v != nil && v.Network != "" {
		s.Network = v.Network
	}
	if s.Kind == config.KindLocal {
		// The local sandbox enforces no network setting and refuses none.
		s.Network = ""
	}
	return s
}

func (a *attemptRun) verifyHarbor(ctx context.Context) error {
	j := a.j
	if a.snapshot == "" {
		return infraErr("the agent's snapshot is missing: nothing to verify")
	}
	hasTest := false
	for _, f := range j.task.Tests {
		if f.Path == "tests/test.sh" {
			hasTest = true
		}
	}
	if !hasTest {
		return &stageError{state.ClassVerifierError, "the task has no tests/test.sh"}
	}
	if err := os.MkdirAll(a.ws, 0o700); err != nil {
		return infraErr("preparing the workspace: %v", err)
	}
	inst, err := j.provider.Start(ctx, sandbox.Spec{
		Settings:  verifierSettings(j.settings, j.eval.Verifier),
		AttemptID: a.id,
		Address:   j.pa.Address,
		Role:      "verifier",
		Store:     a.e.storeDir,
		Lineage:   a.e.lineage,
		Workspace: a.ws,
		Env:       a.verifierEnv(),
		Snapshot:  a.snapshot,
		// test.sh is its one command.
		OneCommand: true,
		Deadline:   j.verifierTimeout(),
	})
	if err != nil {
		return infraErr("starting the verifier's sandbox: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = stopInstance(ctx, inst)
		}
	}()
	p := inst.Paths()
	// The tests enter only now: the agent never saw them.
	if err := inst.Upload(ctx, filepath.Join(j.task.Dir, "tests"), p.Tests); err != nil {
		return infraErr("copying tests/ into the verifier's sandbox: %v", err)
	}
	timeout := j.verifierTimeout()
	res, err := runCommand(ctx, inst, sandbox.ExecRequest{
		Command: []string{"sh", path.Join(p.Tests, "test.sh")},
		Env:     mergeEnv(a.verifierEnv(), pathEnv(p)),
		Dir:     p.Workdir,
	}, timeout)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return infraErr("running tests/test.sh: %v", err)
	}
	a.log.line(hemraLine{Type: "exit", Stage: "verify", Note: "tests/test.sh", Exit: &res.exit, Tail: joinMsg(res.stdout, res.stderr)})
	if res.timedOut {
		return &stageError{state.ClassVerifierError, fmt.Sprintf("tests/test.sh did not finish within %s", timeout)}
	}
	// As for artifacts: a local instance's log folder is read in place
	// once it is stopped; any other is copied out first.
	hostLogs := p.VerifierLogs
	var dlErr error
	if j.settings.Kind != config.KindLocal {
		hostLogs = filepath.Join(a.ws, "collected", "verifier")
		if err := os.MkdirAll(filepath.Dir(hostLogs), 0o700); err != nil {
			return infraErr("preparing the workspace: %v", err)
		}
		dlErr = inst.Download(ctx, p.VerifierLogs, hostLogs)
	}
	stopped = true
	if err := stopInstance(ctx, inst); err != nil {
		return infraErr("stopping the verifier's sandbox: %v", err)
	}
	if dlErr != nil && !errors.Is(dlErr, os.ErrNotExist) {
		return infraErr("copying the verifier's logs out of the sandbox: %v", dlErr)
	}
	reward, rewards, err := readReward(hostLogs)
	if err != nil {
		msg := err.Error()
		if res.exit != 0 {
			msg += fmt.Sprintf(" (test.sh exited %d)", res.exit)
		}
		return &stageError{state.ClassVerifierError, msg}
	}
	a.out.Reward, a.out.Rewards = &reward, rewards
	a.keepRewardDetails(hostLogs)
	return nil
}

// verifierEnv is the only environment the verifier sees: task.toml's
// [verifier] env, where ${NAME} and ${NAME:-default} read only the names
// the verifier block opened, plus those opened names themselves.
func (a *attemptRun) verifierEnv() map[string]string {
	env := map[string]string{}
	for k, v := range a.j.verEnv {
		env[k] = v
	}
	if a.j.task.Config != nil {
		for k, v := range a.j.task.Config.Verifier.Env {
			env[k] = expandOpened(v, a.j.verEnv)
		}
	}
	return env
}

var templateVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

func expandOpened(v string, opened map[string]string) string {
	return templateVar.ReplaceAllStringFunc(v, func(m string) string {
		sub := templateVar.FindStringSubmatch(m)
		if val, ok := opened[sub[1]]; ok {
			return val
		}
		return sub[3]
	})
}
