package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"go.yaml.in/yaml/v3"
)

// The CI recipes of docs/pull-requests.md are files in examples/ci. These
// tests lint them: they parse as YAML with the shape each CI expects,
// their scripts parse as bash, every hemra command line in them parses
// with hemra's own flags, and the script that finds the eval directories
// a pull request touches finds them in a real git repository.

const (
	githubWorkflow = "../../examples/ci/github-hemra-plan.yml"
	gitlabJob      = "../../examples/ci/gitlab-hemra-plan.yml"
)

// ghWorkflow is the part of GitHub's workflow syntax the example uses;
// an unknown key is an error.
type ghWorkflow struct {
	Name        string            `yaml:"name"`
	On          map[string]any    `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Concurrency struct {
		Group            string `yaml:"group"`
		CancelInProgress bool   `yaml:"cancel-in-progress"`
	} `yaml:"concurrency"`
	Jobs map[string]struct {
		RunsOn any               `yaml:"runs-on"`
		Env    map[string]string `yaml:"env"`
		Steps  []struct {
			Name  string            `yaml:"name"`
			ID    string            `yaml:"id"`
			If    string            `yaml:"if"`
			Uses  string            `yaml:"uses"`
			With  map[string]any    `yaml:"with"`
			Run   string            `yaml:"run"`
			Shell string            `yaml:"shell"`
			Env   map[string]string `yaml:"env"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestGitHubWorkflowExample(t *testing.T) {
	var wf ghWorkflow
	readYAML(t, githubWorkflow, &wf)
	if _, ok := wf.On["pull_request"]; !ok {
		t.Errorf("the workflow does not run on pull_request: %v", wf.On)
	}
	if wf.Permissions["pull-requests"] != "write" {
		t.Errorf("the workflow cannot comment: permissions %v", wf.Permissions)
	}
	job, ok := wf.Jobs["plan"]
	if !ok || len(job.Steps) == 0 {
		t.Fatalf("no plan job with steps: %+v", wf.Jobs)
	}
	var scripts []string
	var find string
	for _, s := range job.Steps {
		if (s.Uses == "") == (s.Run == "") {
			t.Errorf("step %q: exactly one of uses and run", s.Name)
		}
		if s.Run != "" {
			scripts = append(scripts, s.Run)
			if strings.Contains(s.Run, "${{") {
				t.Errorf("step %q interpolates ${{ }} into its script (pass it through env:)", s.Name)
			}
		}
		if s.ID == "dirs" {
			find = s.Run
		}
	}
	checkScripts(t, scripts)
	if find == "" {
		t.Fatal("no step with id dirs")
	}
	t.Run("finds the eval directories", func(t *testing.T) {
		repo, base := prRepo(t)
		tmp := t.TempDir()
		out := filepath.Join(tmp, "output")
		runScript(t, repo, find, "BASE_SHA="+base, "RUNNER_TEMP="+tmp, "GITHUB_OUTPUT="+out)
		checkDirs(t, filepath.Join(tmp, "hemra-dirs.txt"))
		if data, _ := os.ReadFile(out); string(data) != "count=2\n" {
			t.Errorf("GITHUB_OUTPUT: %q", data)
		}
	})
}

func TestGitLabJobExample(t *testing.T) {
	var cfg map[string]struct {
		Stage        string            `yaml:"stage"`
		Image        string            `yaml:"image"`
		Tags         []string          `yaml:"tags"`
		Rules        []map[string]any  `yaml:"rules"`
		Variables    map[string]string `yaml:"variables"`
		BeforeScript []string          `yaml:"before_script"`
		Script       []string          `yaml:"script"`
	}
	readYAML(t, gitlabJob, &cfg)
	job, ok := cfg["hemra-plan"]
	if !ok || len(job.Script) == 0 {
		t.Fatalf("no hemra-plan job with a script: %+v", cfg)
	}
	if len(job.Rules) == 0 || !strings.Contains(job.Rules[0]["if"].(string), "merge_request_event") {
		t.Errorf("the job does not run on merge requests: %v", job.Rules)
	}
	checkScripts(t, append(job.BeforeScript, job.Script...))
	t.Run("finds the eval directories", func(t *testing.T) {
		repo, base := prRepo(t)
		// The script up to the first line that posts: finding the
		// directories only.
		script := job.Script[0]
		script = script[:strings.Index(script, "notes=")]
		runScript(t, repo, script, "CI_MERGE_REQUEST_DIFF_BASE_SHA="+base)
		checkDirs(t, filepath.Join(repo, "hemra-dirs.txt"))
	})
}

var hemraLine = regexp.MustCompile(`(?m)^\s*(?:go install .*|hemra\s+(.*?))\s*(?:>.*)?$`)

// checkScripts parses each script with bash -n and each hemra command
// line with hemra's own command-line parser.
func checkScripts(t *testing.T, scripts []string) {
	t.Helper()
	if parseHemraArgs([]string{"plan", "-format", "markdown", "-no-such-flag"}) == nil {
		t.Fatal("the command-line check accepts an unknown flag")
	}
	plans := 0
	for _, s := range scripts {
		if bash, err := exec.LookPath("bash"); err == nil {
			cmd := exec.Command(bash, "-n")
			cmd.Stdin = strings.NewReader(s)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("bash -n: %v\n%s\n%s", err, out, s)
			}
		}
		for _, m := range hemraLine.FindAllStringSubmatch(s, -1) {
			if m[1] == "" {
				continue
			}
			args := shellWords(m[1])
			if err := parseHemraArgs(args); err != nil {
				t.Errorf("hemra %s: %v", m[1], err)
			}
			if args[0] == "plan" {
				plans++
				for _, want := range []string{"-format", "markdown", "-detailed-exitcode", "-chdir"} {
					if !contains(args, want) {
						t.Errorf("hemra %s: no %s", m[1], want)
					}
				}
			}
		}
	}
	if plans == 0 {
		t.Error("no hemra plan command line")
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// shellWords splits a command line the way the shell would for these
// scripts: quotes removed, a variable standing for a word, an array
// expansion for the flags it holds.
func shellWords(line string) []string {
	line = strings.ReplaceAll(line, `"${store[@]}"`, `-store /stores/dir`)
	var words []string
	var cur strings.Builder
	inWord, quote := false, byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	for i, w := range words {
		if strings.HasPrefix(w, "$") {
			words[i] = "somewhere"
		}
	}
	return words
}

// parseHemraArgs parses a command line with hemra's flags, running
// nothing.
func parseHemraArgs(args []string) error {
	var cli CLI
	parser, err := kong.New(&cli, kong.Name("hemra"), kong.Writers(io.Discard, io.Discard), kong.Exit(func(int) {}))
	if err != nil {
		return err
	}
	_, err = parser.Parse(normalizeArgs(args))
	return err
}

// prRepo is a repository with two eval directories and a commit that
// touches one of them (a task file deep inside it) and a file outside
// any; it returns the repository and the base commit.
func prRepo(t *testing.T) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	repo := t.TempDir()
	files := map[string]string{
		"evals/a/main.hcl":                    "eval \"a\" {\n  dataset = dataset.d\n}\n",
		"evals/a/tasks/t1/instruction.md":     "Say hello.\n",
		"evals/b/main.hcl":                    "eval \"b\" {\n  dataset = dataset.d\n}\n",
		"evals/b/tasks/t1/instruction.md":     "Say hello.\n",
		"evals/c/main.hcl":                    "eval \"c\" {\n  dataset = dataset.d\n}\n",
		"shared/harness.hcl":                  "harness \"x\" {}\n",
		"README.md":                           "readme\n",
		"evals/root-level-is-not-an-eval.hcl": "",
	}
	for p, c := range files {
		writeTestFile(t, filepath.Join(repo, p), c)
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "base")
	base := git("rev-parse", "HEAD")
	writeTestFile(t, filepath.Join(repo, "evals/a/tasks/t1/instruction.md"), "Say hello twice.\n")
	writeTestFile(t, filepath.Join(repo, "evals/c/main.hcl"), "eval \"c\" {\n  dataset   = dataset.d\n  attempts = 2\n}\n")
	writeTestFile(t, filepath.Join(repo, "README.md"), "readme, edited\n")
	writeTestFile(t, filepath.Join(repo, "shared/harness.hcl"), "harness \"y\" {}\n")
	git("commit", "-q", "-am", "change")
	return repo, base
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func runScript(t *testing.T, dir, script string, env ...string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	cmd := exec.Command(bash, "-e", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the script failed: %v\n%s", err, out)
	}
}

func checkDirs(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), "evals/a\nevals/c\n"; got != want {
		t.Errorf("eval directories found:\n%s\nwant:\n%s", got, want)
	}
}
