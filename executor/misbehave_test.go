package executor_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/planner"
	"github.com/hemra-dev/hemra/protocol"
	"github.com/hemra-dev/hemra/state"
)

const helloTask = `
-- tasks/hello/task.toml --
[agent]
timeout_sec = 60
-- tasks/hello/instruction.md --
Write hello to hello.txt.
-- tasks/hello/tests/test.sh --
LOGS="$HEMRA_VERIFIER_LOGS"
if [ "$(cat "$HEMRA_WORKDIR/hello.txt" 2>/dev/null)" = hello ]; then echo 1 > "$LOGS/reward.txt"; else echo 0 > "$LOGS/reward.txt"; fi
`

// parseFiles reads "-- name --" sections into a map.
func parseFiles(s string) map[string]string {
	out := map[string]string{}
	var name string
	var b strings.Builder
	flush := func() {
		if name != "" {
			out[name] = strings.TrimLeft(b.String(), "\n")
		}
		b.Reset()
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --") {
			flush()
			name = strings.TrimSuffix(strings.TrimPrefix(line, "-- "), " --")
			continue
		}
		b.WriteString(line + "\n")
	}
	flush()
	return out
}

const hello = `echo '{"type":"hello","protocol":"hemra.protocol/1","harness":{"name":"t"}}'; read -r start;`

// misbehaving harnesses, each a shell script, with the class its attempt
// must end with. The good one must pass while the others fail around it.
var misbehaving = map[string]struct {
	script  string
	timeout string
	class   state.Class
	errWith string
}{
	"good":         {script: hello + ` echo hello > "$HEMRA_WORKDIR/hello.txt"; echo '{"type":"result","status":"ok"}'`, class: state.ClassPassed},
	"nohandshake":  {script: `sleep 30`, class: state.ClassProtocolError, errWith: "no hello"},
	"malformed":    {script: `echo '{"type": "hello", oops'`, class: state.ClassProtocolError, errWith: "not valid JSON"},
	"bigline":      {script: hello + ` head -c 2097152 /dev/zero | tr '\0' a; echo`, class: state.ClassProtocolError, errWith: "line"},
	"flood":        {script: hello + ` while :; do echo '{"type":"event","kind":"log","data":{"level":"info","message":"flooding the pipe with events"}}'; done`, class: state.ClassProtocolError, errWith: "of events"},
	"ignorecancel": {script: `trap '' TERM INT; ` + hello + ` while :; do sleep 1; done`, timeout: "2s", class: state.ClassAgentTimeout, errWith: "deadline"},
	"forker":       {script: hello + ` sleep 300 & echo $! > "$HEMRA_AGENT_LOGS/child.pid"; echo hello > "$HEMRA_WORKDIR/hello.txt"; echo '{"type":"result","status":"ok"}'`, class: state.ClassPassed},
	"symlink":      {script: hello + ` ln -s /etc/passwd "$HEMRA_ARTIFACTS_DIR/passwd"; echo fine > "$HEMRA_ARTIFACTS_DIR/real.txt"; echo hello > "$HEMRA_WORKDIR/hello.txt"; echo '{"type":"result","status":"ok"}'`, class: state.ClassPassed, errWith: "artifact passwd left out"},
	"overquota":    {script: hello + ` head -c 4096 /dev/zero > "$HEMRA_ARTIFACTS_DIR/big.bin"; echo '{"type":"result","status":"ok"}'`, class: state.ClassProtocolError, errWith: "quota"},
}

// TestMisbehavingHarnesses runs every misbehaving harness in one apply:
// each is recorded as its own attempt's error, and the good one passes.
func TestMisbehavingHarnesses(t *testing.T) {
	dir := t.TempDir()
	files := parseFiles(helloTask)
	var hcl strings.Builder
	hcl.WriteString("variable \"here\" {\n  type = string\n}\n\nsandbox \"local\" {\n  kind = \"local\"\n}\n\ndataset \"d\" {\n  source = \"./tasks\"\n}\n")
	var names []string
	for name, h := range misbehaving {
		names = append(names, name)
		files["harnesses/"+name+".sh"] = h.script + "\n"
		timeout := ""
		if h.timeout != "" {
			timeout = "  timeout = \"" + h.timeout + "\"\n"
		}
		hcl.WriteString("\nharness \"" + name + "\" {\n  command = [\"sh\", \"${var.here}/harnesses/" + name + ".sh\"]\n  sandbox = sandbox.local\n" + timeout + "}\n")
	}
	hcl.WriteString("\neval \"e\" {\n  dataset = dataset.d\n  harnesses = [" + strings.Join(prefixed("harness.", names), ", ") + "]\n}\n")
	files["main.hcl"] = hcl.String()
	writeFiles(t, dir, files)

	e := newEnv(t, dir)
	e.hcl = []string{"here=" + dir}
	e.opts.Protocol = protocol.Options{HandshakeTimeout: time.Second, CancelGrace: 300 * time.Millisecond, MaxEventBytes: 1 << 20}
	e.opts.Artifacts = protocol.ArtifactLimits{MaxFileBytes: 1024}
	rep, _ := e.apply(context.Background(), len(names))
	got := byAddress(rep)
	if len(got) != len(names) {
		t.Fatalf("%d attempts, want %d", len(got), len(names))
	}
	st, err := state.Open(e.store, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range misbehaving {
		addr := "e/" + name + "/hello#1"
		a, err := st.CurrentAttempt(addr)
		if err != nil {
			t.Errorf("%s: %v", addr, err)
			continue
		}
		o := a.Outcome
		if o == nil || o.Class != h.class {
			t.Errorf("%s: outcome %+v, want class %s", addr, o, h.class)
			continue
		}
		if h.errWith != "" && !strings.Contains(o.Error, h.errWith) {
			t.Errorf("%s: error %q, want it to mention %q", addr, o.Error, h.errWith)
		}
	}

	// The forker's child did not outlive its attempt. It passed, so its
	// work folder holds only the snapshot a re-verify restores from: the
	// pid is read from its stored agent log.
	fa, _ := st.CurrentAttempt("e/forker/hello#1")
	if entries, err := os.ReadDir(st.WorkDir(fa.ID)); err != nil || len(entries) != 1 || entries[0].Name() != "snapshot" {
		t.Errorf("the work folder of a passed attempt holds %v (%v), want only snapshot/", entries, err)
	}
	var pidBlob string
	for _, f := range fa.Outcome.Logs {
		if f.Path == "agent/child.pid" {
			pidBlob = f.SHA256
		}
	}
	if b, err := st.Blob(pidBlob); err != nil {
		t.Errorf("forker wrote no pid (logs %+v): %v", fa.Outcome.Logs, err)
	} else if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 && syscall.Kill(pid, 0) == nil {
		t.Errorf("the forker's child %d is still running after the apply", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}

	// The symlink was never followed: only the real file is an artifact.
	sa, _ := st.CurrentAttempt("e/symlink/hello#1")
	if len(sa.Outcome.Artifacts) != 1 || sa.Outcome.Artifacts[0].Path != "real.txt" {
		t.Errorf("symlink harness artifacts: %+v, want only real.txt", sa.Outcome.Artifacts)
	}

	// Errors of the harness's own making are not retried; nothing is left.
	plan, _ := e.plan()
	for _, pa := range plan.Attempts {
		if pa.Action != planner.ActionNoop {
			t.Errorf("%s: %s after the apply, want no-op", pa.Address, pa.Action)
		}
	}
}

func prefixed(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return out
}
