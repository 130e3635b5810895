package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// MaxJSONLLine is the longest JSONL line hemra reads; a longer line is a
// diagnostic and the rest of the file is still read.
const MaxJSONLLine = 64 << 20

var utf8BOM = []byte("\xef\xbb\xbf")

// snippetLimit is the size up to which a JSONL file's bytes are handed to
// LoadOptions.Files for diagnostic snippets.
const snippetLimit = 4 << 20

// LoadJSONL reads a JSONL file of tasks, one JSON object per line:
// {"id": "...", "input": <any JSON>, "target": <optional>, "metadata": <optional>}.
// Blank lines are skipped. Tasks come back in file order.
func LoadJSONL(path string) ([]*Task, hcl.Diagnostics) {
	return loadJSONL(path, filepath.Clean(path), LoadOptions{})
}

func loadJSONL(full, display string, opts LoadOptions) ([]*Task, hcl.Diagnostics) {
	fh, err := os.Open(full)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read dataset file", Detail: fmt.Sprintf("%s: %v.", display, pathErrReason(err))}}
	}
	defer fh.Close()

	var (
		tasks  []*Task
		diags  hcl.Diagnostics
		br     = bufio.NewReaderSize(fh, 1<<20)
		long   []byte // lines longer than br's buffer are assembled here
		offset int    // byte offset of the current line's start
	)
	lineDiag := func(line, lineStart, col int, summary, detail string) *hcl.Diagnostic {
		start := hcl.Pos{Line: line, Column: col, Byte: lineStart + col - 1}
		end := hcl.Pos{Line: line, Column: col + 1, Byte: start.Byte + 1}
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail,
			Subject: &hcl.Range{Filename: display, Start: start, End: end}}
	}
	p := &jsonlParser{diag: lineDiag, seen: map[string]int{}, unknown: map[string]*unknownField{}}
	for lineNo := 1; ; lineNo++ {
		line, n, tooLong, err := readLine(br, &long)
		if err != nil && err != io.EOF {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read dataset file", Detail: fmt.Sprintf("%s line %d: %v.", display, lineNo, err)})
			break
		}
		if n == 0 {
			break // io.EOF
		}
		lineStart := offset
		offset += n
		if tooLong {
			diags = append(diags, lineDiag(lineNo, lineStart, 1, "JSONL line too long",
				fmt.Sprintf("Line %d is longer than %d MiB, the longest line hemra reads.", lineNo, MaxJSONLLine>>20)))
		} else {
			t, lineDiags := p.parseLine(line, lineNo, lineStart)
			diags = append(diags, lineDiags...)
			if t != nil {
				tasks = append(tasks, t)
			}
		}
		if err == io.EOF {
			break
		}
	}
	diags = append(diags, p.unknownDiags()...)
	if opts.Files != nil && len(diags) > 0 {
		if fi, err := os.Stat(full); err == nil && fi.Size() <= snippetLimit {
			if src, err := os.ReadFile(full); err == nil {
				opts.Files[display] = &hcl.File{Bytes: src}
			}
		}
	}
	return tasks, diags
}

// readLine returns the next line, newline included, and the number of bytes
// it takes in the file. A line longer than MaxJSONLLine is skipped whole and
// reported as tooLong. long is reused between calls.
func readLine(br *bufio.Reader, long *[]byte) (line []byte, n int, tooLong bool, err error) {
	chunk, err := br.ReadSlice('\n')
	n = len(chunk)
	if !errors.Is(err, bufio.ErrBufferFull) {
		return chunk, n, false, err
	}
	buf := append((*long)[:0], chunk...)
	for errors.Is(err, bufio.ErrBufferFull) {
		chunk, err = br.ReadSlice('\n')
		n += len(chunk)
		if !tooLong && len(buf)+len(chunk) > MaxJSONLLine {
			tooLong, buf = true, buf[:0]
		}
		if !tooLong {
			buf = append(buf, chunk...)
		}
	}
	*long = buf
	return buf, n, tooLong, err
}

type lineDiagFunc func(line, lineStart, col int, summary, detail string) *hcl.Diagnostic

// jsonlParser holds what the lines of one file share: the ids seen so far
// and the unknown fields, reported once each rather than once per line.
type jsonlParser struct {
	diag         lineDiagFunc
	seen         map[string]int // id → line
	unknown      map[string]*unknownField
	unknownOrder []string
}

type unknownField struct {
	diag      *hcl.Diagnostic // at the first line holding the field
	firstLine int
	count     int
}

func (p *jsonlParser) unknownDiags() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, k := range p.unknownOrder {
		u := p.unknown[k]
		u.diag.Severity = hcl.DiagWarning
		lines := fmt.Sprintf("line %d", u.firstLine)
		if u.count > 1 {
			lines = fmt.Sprintf("%d lines, first on line %d", u.count, u.firstLine)
		}
		u.diag.Detail = fmt.Sprintf("The field %q (%s) is ignored: a task has id, input, target and metadata. Put extra data under metadata.", k, lines)
		diags = append(diags, u.diag)
	}
	return diags
}

// parseJSONLLine reads one line into a task. A blank line gives neither a
// task nor a diagnostic; unknown fields are warnings.
func (p *jsonlParser) parseLine(line []byte, lineNo, lineStart int) (*Task, hcl.Diagnostics) {
	diag, seen, unknown := p.diag, p.seen, p.unknown
	trimmed := bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(trimmed)) == 0 {
		return nil, nil
	}
	lead := 0
	if lineNo == 1 && bytes.HasPrefix(trimmed, utf8BOM) {
		lead = len(utf8BOM) // files saved by Windows editors
	}
	lead += len(trimmed[lead:]) - len(bytes.TrimLeft(trimmed[lead:], " \t"))
	if lead == len(trimmed) || len(bytes.TrimSpace(trimmed[lead:])) == 0 {
		return nil, nil // blank but for a byte order mark
	}
	fail := func(col int, summary, detail string) (*Task, hcl.Diagnostics) {
		return nil, hcl.Diagnostics{diag(lineNo, lineStart, col, summary, detail)}
	}
	if trimmed[lead] != '{' {
		return fail(lead+1, "Invalid JSONL line",
			fmt.Sprintf("Line %d is not a JSON object; each line holds one task as {\"id\": ..., \"input\": ...}.", lineNo))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed[lead:], &fields); err != nil {
		col := len(trimmed)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			col = lead + int(se.Offset)
		}
		col = max(1, min(col, len(trimmed)))
		return fail(col, "Invalid JSONL line", fmt.Sprintf("Line %d is not valid JSON: %s.", lineNo, strings.TrimPrefix(err.Error(), "json: ")))
	}
	rawID, ok := fields["id"]
	if !ok {
		return fail(lead+1, "Missing task id", fmt.Sprintf("Line %d has no \"id\": every task needs a unique string id.", lineNo))
	}
	var id string
	if err := json.Unmarshal(rawID, &id); err != nil {
		return fail(fieldColumn(trimmed, "id"), "Invalid task id",
			fmt.Sprintf("Line %d: \"id\" must be a string, not %s (write \"id\": \"%s\").", lineNo, rawID, strings.Trim(string(rawID), `"`)))
	}
	if msg := checkTaskName(id); msg != "" {
		return fail(fieldColumn(trimmed, "id"), "Invalid task id", fmt.Sprintf("Line %d: %s.", lineNo, msg))
	}
	if prev, dup := seen[id]; dup {
		return fail(fieldColumn(trimmed, "id"), "Duplicate task id",
			fmt.Sprintf("Line %d: the id %q is already used on line %d; ids must be unique.", lineNo, id, prev))
	}
	input, ok := fields["input"]
	if !ok {
		return fail(lead+1, "Missing task input", fmt.Sprintf("Line %d (id %q) has no \"input\".", lineNo, id))
	}
	seen[id] = lineNo
	target, metadata := fields["target"], fields["metadata"]
	known := 2 // id and input
	for _, k := range []string{"target", "metadata"} {
		if _, ok := fields[k]; ok {
			known++
		}
	}
	if len(fields) == known {
		fields = nil // nothing unknown: skip sorting the keys
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		switch k {
		case "id", "input", "target", "metadata":
			continue
		}
		u := unknown[k]
		if u == nil {
			u = &unknownField{diag: diag(lineNo, lineStart, fieldColumn(trimmed, k), "Unknown JSONL field", "")}
			u.firstLine = lineNo
			unknown[k] = u
			p.unknownOrder = append(p.unknownOrder, k)
		}
		u.count++
	}
	return &Task{
		Name:     id,
		Kind:     "jsonl",
		Input:    compact(input),
		Target:   compact(target),
		Metadata: compact(metadata),
		Line:     lineNo,
	}, nil
}

// compact drops insignificant white space so re-indenting a file does not
// change what the task is. The key order is kept as written.
func compact(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	var b bytes.Buffer
	b.Grow(len(raw))
	if err := json.Compact(&b, raw); err != nil {
		return slices.Clone(raw) // cannot happen: the decoder validated it
	}
	return b.Bytes()
}

// fieldColumn finds the 1-based column of a top-level key in a line, for
// pointing a diagnostic at it; 1 when not found.
func fieldColumn(line []byte, key string) int {
	i := bytes.Index(line, []byte(`"`+key+`"`))
	if i < 0 {
		return 1
	}
	return i + 1
}
