package judgeruntime

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// block is one part of the user message: text or an image.
type block struct {
	Text      string
	MediaType string // an image when set
	Data      []byte
}

// Bounds, as rewardkit's: a file over maxFile is named but not read. hemra
// bounds the whole working directory's and artifacts' text too.
const (
	maxFile = 1 << 20
	maxTree = 4 << 20
)

var imageTypes = map[string]string{".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".gif": "image/gif", ".webp": "image/webp"}

var documentExts = map[string]bool{".pdf": true, ".docx": true, ".pptx": true, ".xlsx": true, ".xls": true, ".msg": true, ".epub": true, ".html": true, ".htm": true}

// skipDirs are not walked, as rewardkit skips them.
var skipDirs = map[string]bool{"__pycache__": true, "node_modules": true, ".git": true}

// reader reads the inputs folder.
type reader struct {
	job  *Job
	root *os.Root
}

// agentFile is where a path of the agent's filesystem is in the inputs.
func (rd *reader) agentFile(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = path.Join(rd.job.Workdir, p)
	}
	return path.Join(AgentFSDir, path.Clean(p))
}

// fileBlocks reads one file as rewardkit does: hidden files skipped, big
// ones named, images as images, text as text, other binary files skipped.
func (rd *reader) fileBlocks(rel, label string) []block {
	if strings.HasPrefix(path.Base(rel), ".") {
		return nil
	}
	fi, err := rd.root.Stat(filepath.FromSlash(rel))
	if err != nil {
		return []block{{Text: fmt.Sprintf("--- %s ---\n[unreadable]", label)}}
	}
	if fi.Size() > maxFile {
		return []block{{Text: fmt.Sprintf("--- %s ---\n[skipped: file too large]", label)}}
	}
	ext := strings.ToLower(path.Ext(rel))
	data, err := rd.root.ReadFile(filepath.FromSlash(rel))
	if err != nil {
		return []block{{Text: fmt.Sprintf("--- %s ---\n[unreadable]", label)}}
	}
	if mt, ok := imageTypes[ext]; ok {
		return []block{{Text: fmt.Sprintf("--- %s ---", label)}, {MediaType: mt, Data: data}}
	}
	if documentExts[ext] {
		return []block{{Text: fmt.Sprintf("--- %s ---\n[skipped: hemra's judge runtime does not convert %s documents to text]", label, ext)}}
	}
	if !utf8.Valid(data) {
		return nil
	}
	return []block{{Text: fmt.Sprintf("--- %s ---\n%s", label, data)}}
}

// pathBlocks reads paths of the agent's filesystem: a missing one is
// [not found], a folder gives the files directly in it.
func (rd *reader) pathBlocks(paths []string) []block {
	var out []block
	for _, p := range paths {
		rel := rd.agentFile(p)
		fi, err := rd.root.Stat(filepath.FromSlash(rel))
		switch {
		case err != nil:
			out = append(out, block{Text: fmt.Sprintf("--- %s ---\n[not found]", p)})
		case fi.Mode().IsRegular():
			out = append(out, rd.fileBlocks(rel, p)...)
		case fi.IsDir():
			ents, _ := fs.ReadDir(rd.root.FS(), filepath.FromSlash(rel))
			for _, e := range ents {
				if e.Type().IsRegular() {
					out = append(out, rd.fileBlocks(path.Join(rel, e.Name()), path.Join(agentAbs(rd.job.Workdir, p), e.Name()))...)
				}
			}
		}
	}
	return out
}

func agentAbs(workdir, p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return path.Join(workdir, p)
}

// treeBlocks reads every file of a folder in the inputs, labelled under
// prefix, until maxTree bytes of it have been read.
func (rd *reader) treeBlocks(dir, prefix string) []block {
	var files []string
	_ = fs.WalkDir(rd.root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && p != dir && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
			return fs.SkipDir
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	var out []block
	var total int64
	for i, f := range files {
		fi, err := rd.root.Stat(filepath.FromSlash(f))
		if err == nil && total+min(fi.Size(), maxFile) > maxTree {
			out = append(out, block{Text: fmt.Sprintf("--- %s ---\n[%d more files not read: over %d MiB]", prefix, len(files)-i, maxTree>>20)})
			break
		}
		if err == nil {
			total += min(fi.Size(), maxFile)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(f, dir), "/")
		out = append(out, rd.fileBlocks(f, path.Join(prefix, rel))...)
	}
	return out
}

func (rd *reader) text(rel string) (string, bool) {
	b, err := rd.root.ReadFile(filepath.FromSlash(rel))
	if err != nil {
		return "", false
	}
	return string(b), true
}

// contents are the user message's blocks for one call: hemra's inputs the
// rubric asks for, then the files (the criterion's own in individual mode,
// else the judge's), then the reference solution, as rewardkit orders
// them. The trajectory comes last (see Run).
func (rd *reader) contents(files []string) []block {
	r := &rd.job.Rubric
	var out []block
	if r.Sees.Instruction {
		if s, ok := rd.text(InstructionFile); ok {
			out = append(out, block{Text: "## Task instruction\n" + s})
		}
	}
	if r.Sees.LastMessage {
		s, ok := rd.text(LastMessageFile)
		if !ok || strings.TrimSpace(s) == "" {
			s = "[the agent sent no message]"
		}
		out = append(out, block{Text: "## The agent's last message\n" + s})
	}
	if r.Sees.Verifier {
		var b strings.Builder
		b.WriteString("## The verifier's result\n")
		if s, ok := rd.text(path.Join(VerifierDir, RewardFile)); ok {
			b.WriteString("reward.json:\n" + s + "\n")
		} else {
			b.WriteString("[no reward]\n")
		}
		if s, ok := rd.text(path.Join(VerifierDir, DetailsFile)); ok {
			b.WriteString("reward-details.json:\n" + s + "\n")
		}
		out = append(out, block{Text: b.String()})
	}
	out = append(out, rd.pathBlocks(files)...)
	if r.Sees.Workdir {
		out = append(out, rd.treeBlocks(WorkdirDir, rd.job.Workdir)...)
	}
	if r.Sees.Artifacts {
		out = append(out, rd.treeBlocks(ArtifactsDir, "artifacts")...)
	}
	if r.Reference != "" {
		var ref []block
		switch {
		case !strings.HasPrefix(r.Reference, "/"):
			ref = rd.fileBlocks(path.Join(JudgeDir, r.Reference), r.Reference)
		case r.Reference == "/tests" || strings.HasPrefix(r.Reference, "/tests/"):
			ref = rd.fileBlocks(path.Join(TestsDir, strings.TrimPrefix(r.Reference, "/tests/")), r.Reference)
		default:
			ref = rd.pathBlocks([]string{r.Reference})
		}
		if len(ref) > 0 {
			out = append(out, block{Text: "## Reference Solution\nThe following is a reference solution. Compare the agent's work against it:"})
			out = append(out, ref...)
		}
	}
	return out
}

func textOf(blocks []block) string {
	var parts []string
	for _, b := range blocks {
		if b.MediaType == "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

func dataURL(b block) string {
	return "data:" + b.MediaType + ";base64," + base64.StdEncoding.EncodeToString(b.Data)
}

// trajectory is an ATIF trajectory, the fields a judge reads.
type trajectory struct {
	Agent struct {
		Name string `json:"name"`
	} `json:"agent"`
	Steps []struct {
		StepID    any             `json:"step_id"`
		Source    string          `json:"source"`
		Message   json.RawMessage `json:"message"`
		Reasoning string          `json:"reasoning_content"`
		ToolCalls []struct {
			FunctionName string          `json:"function_name"`
			Arguments    json.RawMessage `json:"arguments"`
		} `json:"tool_calls"`
		Observation *struct {
			Results []struct {
				Content json.RawMessage `json:"content"`
			} `json:"results"`
		} `json:"observation"`
	} `json:"steps"`
}

// formatTrajectory renders an ATIF trajectory as rewardkit does: a header,
// then each step with its message, reasoning, tool calls and results, each
// cut to an equal share of maxTokens (counted as 4 characters a token:
// the runtime carries no tokenizer).
func formatTrajectory(data []byte, found bool, maxTokens int) string {
	if !found {
		return "[trajectory not found]"
	}
	var t trajectory
	if json.Unmarshal(data, &t) != nil {
		return "[trajectory parse error]"
	}
	if len(t.Steps) == 0 {
		return "[trajectory empty]"
	}
	name := t.Agent.Name
	if name == "" {
		name = "unknown"
	}
	blocks := 0
	for _, s := range t.Steps {
		if msgText(s.Message) != "" {
			blocks++
		}
		if s.Reasoning != "" {
			blocks++
		}
		blocks += len(s.ToolCalls)
		if s.Observation != nil {
			blocks += len(s.Observation.Results)
		}
	}
	limit := max(10, maxTokens/max(1, blocks)) * 4
	clip := func(s string) string {
		if len(s) <= limit {
			return s
		}
		s = s[:limit]
		for !utf8.ValidString(s) && len(s) > 0 {
			s = s[:len(s)-1]
		}
		return s + "..."
	}
	var parts []string
	for _, s := range t.Steps {
		lines := []string{fmt.Sprintf("### Step %v [%s]", stepID(s.StepID), orQ(s.Source))}
		if m := msgText(s.Message); m != "" {
			lines = append(lines, clip(m))
		}
		if s.Reasoning != "" {
			lines = append(lines, "[reasoning] "+clip(s.Reasoning))
		}
		for _, tc := range s.ToolCalls {
			lines = append(lines, clip(fmt.Sprintf("[tool_call] %s(%s)", orUnknown(tc.FunctionName), argString(tc.Arguments))))
		}
		if s.Observation != nil {
			for _, r := range s.Observation.Results {
				if c := msgText(r.Content); c != "" {
					lines = append(lines, "[result] "+clip(c))
				}
			}
		}
		parts = append(parts, strings.Join(lines, "\n"))
	}
	return fmt.Sprintf("## Agent Trajectory (%d steps, agent: %s)\n", len(t.Steps), name) + strings.Join(parts, "\n\n")
}

func stepID(v any) any {
	if v == nil {
		return "?"
	}
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return int64(f)
	}
	return v
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// msgText is a message or result content: a string, or the text parts
// of a list ([image] for images).
func msgText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw)
	}
	var out []string
	for _, p := range parts {
		switch p.Type {
		case "text":
			out = append(out, p.Text)
		case "image":
			out = append(out, "[image]")
		}
	}
	return strings.Join(out, " ")
}

// argString writes a tool call's arguments as rewardkit does:
// key="value" for strings, key=value otherwise.
func argString(raw json.RawMessage) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return string(raw)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		var s string
		if json.Unmarshal(obj[k], &s) == nil {
			out = append(out, fmt.Sprintf(`%s="%s"`, k, s))
		} else {
			out = append(out, fmt.Sprintf("%s=%s", k, obj[k]))
		}
	}
	return strings.Join(out, ", ")
}
