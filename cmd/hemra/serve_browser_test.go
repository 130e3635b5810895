package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/hemra-dev/hemra/results"
	"github.com/hemra-dev/hemra/state"
)

// The browser suite: `hemra serve` on stores built by real applies (local
// sandbox), driven by Debian's chromium through chromedp. It asserts on
// what a person sees; screenshots of every page it visits are kept under
// $HEMRA_TEST_ARTIFACTS/serve (CI keeps them), or the test's temp folder.
// Without chromium it skips, unless HEMRA_TEST_BROWSER=1 (.ci/run sets it).

// scriptedHarness is a program harness that leaves a trajectory worth
// looking at: a message, a tool call and its result, a log line, and two
// artifacts. It solves hello-world and fizzbuzz, json-report on #1 only,
// sum-to-100 never. Its message and one artifact hold planted markup that
// must never run: it would set window.__pwned.
const scriptedHarness = `#!/bin/sh
dir=$(cd "$(dirname "$0")" && pwd)
echo '{"type":"hello","protocol":"hemra.protocol/1","harness":{"name":"scripted","version":"1"}}'
read -r start
task=$(printf '%s' "$start" | sed -n 's/.*"task":{"id":"\([^"]*\)".*/\1/p')
rep=$(printf '%s' "$start" | sed -n 's/.*"repetition":\([0-9]*\).*/\1/p')
echo '{"type":"event","kind":"message","data":{"role":"assistant","content":"Planted: <script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\"> done"}}'
echo '{"type":"event","kind":"tool_call","data":{"id":"call-1","name":"write_file","input":{"path":"notes.txt"}}}'
echo '{"type":"event","kind":"tool_result","data":{"id":"call-1","output":"wrote 12 bytes","is_error":false}}'
echo '{"type":"event","kind":"log","data":{"level":"info","message":"working on '"$task"'"}}'
printf '<html><body><script>window.__pwned=3</script><h1 id="pwned">pwned</h1></body></html>\n' > "$HEMRA_ARTIFACTS_DIR/report.html"
printf 'plain notes\n' > "$HEMRA_ARTIFACTS_DIR/notes.txt"
case "$task" in
  hello-world|fizzbuzz) k=2 ;;
  json-report) k=1 ;;
  *) k=0 ;;
esac
if [ "$rep" -le "$k" ]; then
  sh "$dir/tasks/$task/solution/solve.sh" >&2
fi
echo '{"type":"result","status":"ok","output":"done","usage":{"input_tokens":1200,"output_tokens":80,"cost_usd":0.002}}'
`

const scriptedHCL = `sandbox "local" {
  kind = "local"
}

harness "oracle" {
  builtin = "oracle"
  sandbox = sandbox.local
}

harness "scripted" {
  command = ["./scripted.sh"]
  sandbox = sandbox.local
}

dataset "quickstart" {
  source = "./tasks"
}

eval "smoke" {
  dataset   = dataset.quickstart
  harnesses = [harness.oracle, harness.scripted]
  attempts  = 2
}
`

// gatedHarness waits for gate/<task> (at most 60 s) before it ends: the
// live test opens a page, then lets the attempts finish one by one.
const gatedHarness = `#!/bin/sh
dir=$(cd "$(dirname "$0")" && pwd)
echo '{"type":"hello","protocol":"hemra.protocol/1","harness":{"name":"gated","version":"1"}}'
read -r start
task=$(printf '%s' "$start" | sed -n 's/.*"task":{"id":"\([^"]*\)".*/\1/p')
i=0
while [ ! -e "$dir/gate/$task" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
sh "$dir/tasks/$task/solution/solve.sh" >&2
echo '{"type":"result","status":"ok","output":"done"}'
`

const gatedHCL = `sandbox "local" {
  kind = "local"
}

harness "gated" {
  command = ["./gated.sh"]
  sandbox = sandbox.local
}

dataset "quickstart" {
  source = "./tasks"
}

eval "live" {
  dataset   = dataset.quickstart
  harnesses = [harness.gated]
  attempts  = 1
}
`

// evalDir writes an eval directory with the quickstart's tasks, main.hcl
// and one harness script.
func evalDir(t *testing.T, hcl, script, scriptName string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ev")
	if err := os.CopyFS(filepath.Join(dir, "tasks"), os.DirFS("../../examples/quickstart/tasks")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, scriptName), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startServe runs `hemra serve` in-process on a free loopback port and
// returns its URL and token; it stops with the test.
func startServe(t *testing.T, dir string, args ...string) (url, token string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	type started struct{ url, token string }
	ready := make(chan started, 1)
	done := make(chan struct{})
	serveHooks.Context = ctx
	serveHooks.Listening = func(u, tok string) { ready <- started{u, tok} }
	var out string
	var code int
	go func() {
		defer close(done)
		var errOut string
		out, errOut, code = hemraCall(dir, nil, append([]string{"serve", "-listen", "127.0.0.1:0"}, args...)...)
		out += errOut
	}()
	select {
	case s := <-ready:
		url, token = s.url, s.token
	case <-done:
		t.Fatalf("hemra serve ended at once (exit %d):\n%s", code, out)
	case <-time.After(30 * time.Second):
		t.Fatal("hemra serve did not start listening within 30s")
	}
	serveHooks.Context, serveHooks.Listening = nil, nil
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("hemra serve did not stop within 10s of its context ending")
		}
		if code != 0 {
			t.Errorf("hemra serve: exit %d\n%s", code, out)
		}
	})
	return url, token
}

// chromium is the browser to drive, or a skip (a failure with
// HEMRA_TEST_BROWSER=1).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH: the browser tests of hemra serve need Debian's chromium (apt-get install chromium)"
	if os.Getenv("HEMRA_TEST_BROWSER") == "1" {
		t.Fatal(msg + ", and HEMRA_TEST_BROWSER=1 requires them")
	}
	t.Skip(msg + "; HEMRA_TEST_BROWSER=1 makes this a failure")
	return ""
}

// newBrowser starts one headless chromium for a test and returns a tab.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // chromium refuses its sandbox as root (CI)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return ctx
}

// shots keeps full-page screenshots, numbered in the order taken.
type shots struct {
	dir string
	n   int
}

func newShots(t *testing.T) *shots {
	dir := filepath.Join(t.TempDir(), "screenshots")
	if base := os.Getenv("HEMRA_TEST_ARTIFACTS"); base != "" {
		dir = filepath.Join(base, "serve", t.Name())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return &shots{dir: dir}
}

func (s *shots) take(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	s.n++
	if err := os.WriteFile(filepath.Join(s.dir, fmt.Sprintf("%02d-%s.png", s.n, name)), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// text is what a person reads in the element sel (first match): a CSS
// selector, or an XPath query as a chromedp.Search.
func text[S chromedp.Selectable](t *testing.T, ctx context.Context, sel S) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(sel, chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("reading %v: %v", sel, err)
	}
	return s
}

func mustDo(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

func location(t *testing.T, ctx context.Context) string {
	t.Helper()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatalf("reading the location: %v", err)
	}
	return loc
}

// xp is an XPath query.
type xp = chromedp.Search

// css is a CSS selector.
type css = chromedp.CSS

func wantIn(t *testing.T, where, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s does not show %q; it shows:\n%s", where, w, got)
		}
	}
}

// notPwned fails when any planted markup ran.
func notPwned(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	if eval[bool](t, ctx, `window.__pwned !== undefined || document.getElementById("pwned") !== null`) {
		t.Fatalf("%s: planted markup ran (window.__pwned is set or #pwned exists)", where)
	}
	if scripts := eval[int](t, ctx, `document.scripts.length + document.querySelectorAll("img[onerror]").length`); scripts != 0 {
		t.Fatalf("%s: the page holds %d script or event-handler elements; it should hold none", where, scripts)
	}
}

// TestServeInBrowser clicks through runs → run → matrix cell → task →
// attempt on a store built by a real apply, checks what each page shows,
// that planted markup in an event and an artifact never runs, and that an
// artifact is a download, never a page.
func TestServeInBrowser(t *testing.T) {
	ctx := newBrowser(t)
	sh := newShots(t)
	dir := evalDir(t, scriptedHCL, scriptedHarness, "scripted.sh")
	out := hemraOK(t, dir, nil, "apply", "-auto-approve", "-no-color")
	if !strings.Contains(out, "Apply complete: 16 attempts") {
		t.Fatalf("apply:\n%s", out)
	}
	hemraOK(t, dir, nil, "plan", "-out", "plan.hplan", "-no-color", "-replace", "smoke/scripted/sum-to-100#1")
	base, _ := startServe(t, dir)

	// Runs: one apply run, finished.
	mustDo(t, ctx, "opening the runs page", chromedp.Navigate(base+"runs"), chromedp.WaitVisible(css("table.runs")))
	sh.take(t, ctx, "runs")
	wantIn(t, "the runs page", text(t, ctx, css("table.runs tbody")), "finished", "16/16")

	// → the run: its matrix.
	mustDo(t, ctx, "clicking the run", chromedp.Click(css("table.runs tbody a"), chromedp.NodeVisible), chromedp.WaitVisible(css("table.matrix")))
	sh.take(t, ctx, "run")
	wantIn(t, "the run page", text(t, ctx, css("#progress")), "16 of 16 planned attempts ended")
	matrix := text(t, ctx, css("table.matrix"))
	// oracle passes all 8; scripted passes hello-world ×2, fizzbuzz ×2,
	// json-report #1: 5 of 8.
	wantIn(t, "the run's matrix", matrix, "oracle", "scripted", "100.0%", "62.5%", "8/8 passed", "5/8 passed")
	if bars := eval[int](t, ctx, `document.querySelectorAll("figure.plot svg rect.bar").length`); bars != 2 {
		t.Errorf("the pass-rate plot has %d bars, want 2 (one per harness)", bars)
	}

	// → the latest results' matrix, as the front page shows it.
	mustDo(t, ctx, "opening the matrix", chromedp.Navigate(base), chromedp.WaitVisible(css("table.matrix")))
	sh.take(t, ctx, "matrix")
	wantIn(t, "the matrix", text(t, ctx, css("table.matrix")), "62.5%", "mean reward 0.625")

	// → smoke/scripted, task by task, then only the failed ones, then the
	// flips against oracle.
	mustDo(t, ctx, "clicking the scripted cell",
		chromedp.Click(xp(`//table[contains(@class,"matrix")]//td[contains(.,"5/8 passed")]/a`)), chromedp.WaitVisible(css("table.tasks")))
	sh.take(t, ctx, "group")
	wantIn(t, "the group page", text(t, ctx, css("h1")), "smoke / scripted")
	tasks := text(t, ctx, css("table.tasks tbody"))
	wantIn(t, "the group's tasks", tasks, "hello-world", "fizzbuzz", "json-report", "sum-to-100")
	mustDo(t, ctx, "filtering failed tasks", chromedp.Click(xp(`//a[contains(@class,"filter") and normalize-space()="failed"]`)),
		chromedp.WaitVisible(xp(`//p[contains(@class,"count") and contains(.,"(failed)")]`)))
	sh.take(t, ctx, "group-failed")
	failed := text(t, ctx, css("table.tasks tbody"))
	wantIn(t, "the failed filter", failed, "json-report", "sum-to-100")
	if strings.Contains(failed, "hello-world") {
		t.Errorf("the failed filter shows hello-world, which passed twice:\n%s", failed)
	}
	mustDo(t, ctx, "showing flips against oracle", chromedp.Click(xp(`//button[normalize-space()="show flips"]`)),
		chromedp.WaitVisible(xp(`//p[contains(@class,"count") and contains(.,"against smoke/oracle")]`)))
	sh.take(t, ctx, "group-flipped")
	flipped := text(t, ctx, css("table.tasks tbody"))
	wantIn(t, "the flipped filter", flipped, "sum-to-100", "broke")
	if strings.Contains(flipped, "hello-world") || strings.Contains(flipped, "json-report") {
		t.Errorf("the flipped filter shows a task that did not flip (json-report passed 1 of 2: half solves it):\n%s", flipped)
	}

	// → a task: its two attempts.
	mustDo(t, ctx, "back to all tasks", chromedp.Click(xp(`//a[contains(@class,"filter") and normalize-space()="all"]`)),
		chromedp.WaitVisible(xp(`//table[contains(@class,"tasks")]//a[normalize-space()="json-report"]`)))
	mustDo(t, ctx, "clicking json-report", chromedp.Click(xp(`//table[contains(@class,"tasks")]//a[normalize-space()="json-report"]`)),
		chromedp.WaitVisible(css("table.attempts")))
	sh.take(t, ctx, "task")
	wantIn(t, "the task page", text(t, ctx, css("table.attempts tbody")), "smoke/scripted/json-report#1", "smoke/scripted/json-report#2", "passed", "task_failure")

	// → an attempt: the trajectory, verifier, files.
	mustDo(t, ctx, "clicking attempt #1", chromedp.Click(xp(`//a[normalize-space()="smoke/scripted/json-report#1"]`)),
		chromedp.WaitVisible(css("ol.trajectory")))
	sh.take(t, ctx, "attempt")
	wantIn(t, "the attempt page", text(t, ctx, css("h1")), "smoke/scripted/json-report#1")
	wantIn(t, "the attempt record", text(t, ctx, css("dl.record")), "finished", "passed", "1200 input")
	traj := text(t, ctx, css("ol.trajectory"))
	wantIn(t, "the trajectory", traj, "hello", "message", "assistant", "tool_call", "write_file", "wrote 12 bytes", "working on json-report", "result",
		`Planted: <script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> done`)
	wantIn(t, "the verifier section", text(t, ctx, css("section.command")), "verify", "tests/test.sh", "exited 0")
	wantIn(t, "the files", text(t, ctx, css("table.files")), "report.html", "notes.txt", "events.jsonl", "verifier/reward.json")
	notPwned(t, ctx, "the attempt page")
	// The page and hemra show agree on the attempt's record.
	record := text(t, ctx, css("dl.record"))
	for _, line := range strings.Split(hemraOK(t, dir, nil, "show", "-no-color", "smoke/scripted/json-report#1"), "\n")[1:] {
		key, value, _ := strings.Cut(strings.TrimSpace(line), "  ")
		if key == "" || strings.HasPrefix(line, "Transitions") {
			break
		}
		value = strings.TrimSpace(value)
		if key == "output" { // JSON in show, its text on the page
			var s string
			if json.Unmarshal([]byte(value), &s) == nil {
				value = s
			}
		}
		if key != "time" && !strings.Contains(record, value) {
			t.Errorf("hemra show prints %s %q; the attempt page shows:\n%s", key, value, record)
		}
	}

	// The artifact with a <script> is a download: clicking it saves the
	// file, byte for byte, and the page stays what it was.
	dl := t.TempDir()
	var mu sync.Mutex
	completed := map[string]bool{}
	if err := chromedp.ListenBrowser(ctx, func(ev any) {
		if e, ok := ev.(*browser.EventDownloadProgress); ok && e.State == browser.DownloadProgressStateCompleted {
			mu.Lock()
			completed[e.GUID] = true
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	events := true
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dl, EventsEnabled: &events}); err != nil {
		t.Fatalf("allowing downloads: %v", err)
	}
	mustDo(t, ctx, "downloading report.html", chromedp.Click(xp(`//table[contains(@class,"files")]//tr[contains(.,"report.html")]//a`)))
	deadline := time.Now().Add(20 * time.Second)
	var got []byte
	for time.Now().Before(deadline) && got == nil {
		mu.Lock()
		for guid := range completed {
			got, _ = os.ReadFile(filepath.Join(dl, guid))
		}
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(string(got), "<script>window.__pwned=3</script>") {
		t.Fatalf("the report.html download holds %q, want the artifact as the agent wrote it", got)
	}
	loc := location(t, ctx)
	if !strings.Contains(loc, "/attempt?") {
		t.Errorf("after the download the tab shows %s, want the attempt page still", loc)
	}
	notPwned(t, ctx, "the attempt page after the download")

	// Opening the artifact's URL directly is a download too: the tab never
	// shows it.
	href, err := chromedp.Run(ctx, chromedp.AttributeValue(xp(`//table[contains(@class,"files")]//tr[contains(.,"report.html")]//a`), "href"))
	if err != nil || !href.Exists {
		t.Fatalf("reading the artifact link: %v", err)
	}
	_ = chromedp.Do(ctx, chromedp.Navigate(base+strings.TrimPrefix(href.Value, "/"))) // an aborted navigation: the download
	time.Sleep(300 * time.Millisecond)
	if loc = location(t, ctx); strings.Contains(loc, "/attempt/file") {
		title, _ := chromedp.Run(ctx, chromedp.Title())
		t.Errorf("navigating to the artifact showed it as a page (%s, title %q)", loc, title)
	}
	notPwned(t, ctx, "after navigating to the artifact")

	// The same page as JSON.
	resp, err := http.Get(base + "attempt.json?a=" + "smoke/scripted/json-report%231")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "application/json") {
		t.Errorf("attempt.json: %d %s", resp.StatusCode, ct)
	}

	// Compare: oracle against scripted.
	mustDo(t, ctx, "opening compare", chromedp.Navigate(base+"compare?a=smoke/oracle&b=smoke/scripted"), chromedp.WaitVisible(css("p.paired")))
	sh.take(t, ctx, "compare")
	wantIn(t, "the comparison", text(t, ctx, css("p.paired")), "Paired difference B − A over 4 shared tasks", "-0.375")
	wantIn(t, "the comparison's tasks", text(t, ctx, css("table.tasks tbody")), "sum-to-100", "broke")

	// A saved plan, as the pull-request comment shows it.
	mustDo(t, ctx, "opening the plans", chromedp.Navigate(base+"plans"), chromedp.WaitVisible(css("table.plans")))
	mustDo(t, ctx, "clicking the plan", chromedp.Click(xp(`//a[normalize-space()="plan.hplan"]`)), chromedp.WaitVisible(css("article.markdown")))
	sh.take(t, ctx, "plan")
	wantIn(t, "the plan", text(t, ctx, css("article.markdown")), "1 to re-run", "smoke: 1 to re-run", "Made by hemra")
	if md := text(t, ctx, css("article.markdown")); strings.Contains(md, "<sub>") || strings.Contains(md, "<details>") {
		t.Errorf("the plan shows its HTML tags as text:\n%s", md)
	}
	if eval[int](t, ctx, `document.querySelectorAll("article.markdown details").length`) == 0 {
		t.Error("the plan's Markdown has no collapsed <details> section: its HTML was not kept")
	}
	mustDo(t, ctx, "the plan as text", chromedp.Click(xp(`//a[contains(.,"as hemra plan prints it")]`)), chromedp.WaitVisible(css("pre.plan-text")))
	sh.take(t, ctx, "plan-text")
	wantIn(t, "the plan text", text(t, ctx, css("pre.plan-text")), "-/+", "Plan: ")
}

// TestServeLiveDuringApply opens a run's page while its apply runs and
// sees it update as attempts finish, without touching the page: the
// store is read beside the writer, which is never held up.
func TestServeLiveDuringApply(t *testing.T) {
	ctx := newBrowser(t)
	sh := newShots(t)
	dir := evalDir(t, gatedHCL, gatedHarness, "gated.sh")
	if err := os.MkdirAll(filepath.Join(dir, "gate"), 0o755); err != nil {
		t.Fatal(err)
	}
	base, _ := startServe(t, dir)

	// The apply is a process of its own, as a user's is: testscript.Main
	// put this test binary on PATH as hemra.
	hemraBin, err := exec.LookPath("hemra")
	if err != nil {
		t.Fatal(err)
	}
	actx, cancelApply := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancelApply()
	apply := exec.CommandContext(actx, hemraBin, "-chdir", dir, "apply", "-auto-approve", "-no-color", "-parallelism", "4")
	apply.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	applied := make(chan string, 1)
	go func() {
		out, err := apply.CombinedOutput()
		applied <- fmt.Sprintf("exit %v\n%s", err, out)
	}()
	gates := []string{"hello-world", "fizzbuzz", "json-report", "sum-to-100"}
	defer func() { // never leave the apply waiting
		for _, g := range gates {
			_ = os.WriteFile(filepath.Join(dir, "gate", g), nil, 0o644)
		}
	}()

	// Wait for the run to exist and its four attempts to start.
	store, err := state.Open(filepath.Join(dir, ".hemra"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var runID string
	for deadline := time.Now().Add(60 * time.Second); runID == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if l, err := results.LoadRuns(store); err == nil && len(l.Runs) == 1 && l.Runs[0].Ran == 4 {
			runID = l.Runs[0].ID
		}
	}
	if runID == "" {
		select {
		case out := <-applied:
			t.Fatalf("the apply ended before its run showed four attempts:\n%s", out)
		default:
			t.Fatal("no run with four attempts within 60s")
		}
	}

	mustDo(t, ctx, "opening the run page", chromedp.Navigate(base+"run?id="+runID), chromedp.WaitVisible(css("#progress")))
	sh.take(t, ctx, "live-0")
	wantIn(t, "the live run page", text(t, ctx, css("p.lede")), "running", "● live", "0 of 4 planned attempts ended", "4 running")

	for i, g := range gates {
		if err := os.WriteFile(filepath.Join(dir, "gate", g), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%d of 4 planned attempts ended", i+1)
		// The page reloads itself; the test only reads it.
		if err := chromedp.Do(ctx, chromedp.WaitVisible(xp(fmt.Sprintf(`//span[@id="progress" and contains(., %q)]`, want)))); err != nil {
			t.Fatalf("the run page never showed %q after %s finished: %v", want, g, err)
		}
		sh.take(t, ctx, fmt.Sprintf("live-%d", i+1))
	}
	select {
	case out := <-applied:
		if !strings.HasPrefix(out, "exit <nil>") || !strings.Contains(out, "Apply complete: 4 attempts") {
			t.Fatalf("apply:\n%s", out)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the apply did not end within 60s of its last gate")
	}
	// Once the run is finished, the page says so and stops reloading.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(xp(`//span[contains(@class,"status") and normalize-space()="finished"]`))); err != nil {
		t.Fatalf("the run page never showed the run finished: %v", err)
	}
	sh.take(t, ctx, "live-finished")
	if eval[int](t, ctx, `document.querySelectorAll('meta[http-equiv="refresh"]').length`) != 0 {
		t.Error("the page of a finished run still reloads itself")
	}
	wantIn(t, "the finished run's matrix", text(t, ctx, css("table.matrix")), "100.0%", "4/4 passed")
}

// TestServeExposeToken: beyond loopback only with --expose, and then
// nothing without the token — in a browser as with a plain client.
func TestServeExposeToken(t *testing.T) {
	dir := evalDir(t, scriptedHCL, scriptedHarness, "scripted.sh")
	for _, addr := range []string{"0.0.0.0:7878", ":7878", "10.20.30.40:7878", "[::]:7878"} {
		out, errOut, code := hemraCall(dir, nil, "serve", "-listen", addr)
		if code == 0 || !strings.Contains(errOut, "--expose") {
			t.Errorf("serve -listen %s: exit %d, want a refusal that names --expose:\n%s%s", addr, code, out, errOut)
		}
	}
	base, token := startServe(t, dir, "--expose")
	if len(token) < 40 {
		t.Fatalf("--expose printed a token of %d characters", len(token))
	}
	for _, p := range []string{"", "runs", "matrix.json", "attempt/file?id=x&f=events", "static/style.css"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /%s without the token: %d, want 401", p, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("GET", base+"matrix.json", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /matrix.json with the token: %d, want 200", resp.StatusCode)
	}
	req.Header.Set("Authorization", "Bearer "+token[:len(token)-1]+"x")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a wrong token: %d, want 401", resp.StatusCode)
		}
	}

	ctx := newBrowser(t)
	sh := newShots(t)
	mustDo(t, ctx, "opening without the token", chromedp.Navigate(base+"runs"), chromedp.WaitVisible(css("body")))
	wantIn(t, "the page without the token", text(t, ctx, css("body")), "401 Unauthorized")
	sh.take(t, ctx, "no-token")
	mustDo(t, ctx, "opening the printed URL", chromedp.Navigate(base+"?token="+token), chromedp.WaitVisible(css("h1")))
	if loc := location(t, ctx); strings.Contains(loc, token) {
		t.Errorf("the token stays in the address bar: %s", loc)
	}
	wantIn(t, "the front page with the token", text(t, ctx, css("h1")), "Results")
	mustDo(t, ctx, "following a link", chromedp.Click(xp(`//header//a[normalize-space()="Runs"]`)), chromedp.WaitVisible(css("table.runs")))
	sh.take(t, ctx, "with-token")
}
