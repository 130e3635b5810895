package web

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hemra-dev/hemra/planner"
	"github.com/hemra-dev/hemra/results"
	"github.com/hemra-dev/hemra/state"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

//go:embed static/style.css
var styleCSS []byte

// parseTemplates builds one template set per page: the layout, the
// shared partials, and the page's own file.
func parseTemplates() (map[string]*template.Template, error) {
	base, err := template.New("base").Funcs(funcs).ParseFS(templateFS, "templates/layout.tmpl", "templates/parts.tmpl")
	if err != nil {
		return nil, err
	}
	entries, err := templateFS.ReadDir("templates")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".tmpl")
		if name == "layout" || name == "parts" {
			continue
		}
		t, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if _, err := t.ParseFS(templateFS, "templates/"+e.Name()); err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}

func serveStatic(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "max-age=3600")
	http.ServeContent(w, r, "style.css", time.Time{}, bytes.NewReader(styleCSS))
}

// attachment is a Content-Disposition that saves the file under its base
// name (non-ASCII as RFC 5987's filename*), never shows it.
func attachment(name string) string {
	base := path.Base(strings.ReplaceAll(name, "\\", "/"))
	if base == "." || base == "/" || base == "" {
		base = "file"
	}
	// The plain filename keeps letters, digits and a few marks; the exact
	// name goes in RFC 5987's filename*, percent-encoded.
	ascii := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-+=,()[] ", r) {
			return r
		}
		return '_'
	}, base)
	if ascii == base {
		return `attachment; filename="` + base + `"`
	}
	return fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`, ascii, pathEscapeAll(base))
}

func pathEscapeAll(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func copyN(w io.Writer, r io.Reader, n int64) (int64, error) {
	return io.CopyN(w, r, n)
}

// interval is an estimate's 95% interval, when it has one.
func interval(e *results.Estimate) (lo, hi float64, ok bool) {
	if !e.HasInterval() {
		return 0, 0, false
	}
	return e.Low, e.High, true
}

// maxShown is how much of one agent-written value (a message, a tool's
// input or output) a page shows; the event log download has it all.
const maxShown = 64 << 10

var funcs = template.FuncMap{
	"pct": func(e *results.Estimate) string {
		if e == nil {
			return "–"
		}
		return fmt.Sprintf("%.1f%%", 100*e.Mean)
	},
	"mean": func(e *results.Estimate) string {
		if e == nil {
			return "–"
		}
		return results.Num(e.Mean)
	},
	"ci": func(e *results.Estimate) string {
		lo, hi, ok := interval(e)
		if !ok {
			return "–"
		}
		return "[" + results.Num(lo) + ", " + results.Num(hi) + "]"
	},
	"pctci": func(e *results.Estimate) string {
		lo, hi, ok := interval(e)
		if !ok {
			return "–"
		}
		return fmt.Sprintf("[%.1f%%, %.1f%%]", 100*lo, 100*hi)
	},
	"signedci": func(e *results.Estimate) string {
		lo, hi, ok := interval(e)
		if !ok {
			return "–"
		}
		return "[" + results.Signed(lo) + ", " + results.Signed(hi) + "]"
	},
	"signed": func(e *results.Estimate) string {
		if e == nil {
			return "–"
		}
		return results.Signed(e.Mean)
	},
	"num":    results.Num,
	"reward": rewardText,
	"score": func(p *float64) string {
		if p == nil {
			return "error"
		}
		return rewardText(p)
	},
	"seconds": func(s float64) string {
		if s <= 0 {
			return "–"
		}
		return roundDuration(time.Duration(s * float64(time.Second))).String()
	},
	"dur": func(d time.Duration) string {
		if d <= 0 {
			return "–"
		}
		return roundDuration(d).String()
	},
	"since": func(a, b time.Time) string {
		if a.IsZero() || b.IsZero() {
			return "–"
		}
		return roundDuration(b.Sub(a)).String()
	},
	"when": func(t any) string {
		switch t := t.(type) {
		case time.Time:
			if t.IsZero() {
				return "–"
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		case *time.Time:
			if t == nil || t.IsZero() {
				return "–"
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		}
		return "–"
	},
	"whenms": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"rewardList": func(m map[string]float64) string {
		parts := make([]string, 0, len(m))
		for _, k := range sortedKeys(m) {
			v := m[k]
			parts = append(parts, k+"="+rewardText(&v))
		}
		return strings.Join(parts, ", ")
	},
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("15:04:05.000")
	},
	"bytes": func(n int64) string {
		if n < 0 {
			return "–"
		}
		return formatBytes(n)
	},
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		if s == "" {
			return "–"
		}
		return s
	},
	"verifierMode": planner.DescribeVerifierMode,
	"dash": func(v any) string {
		s := fmt.Sprint(v)
		if s == "" || s == "0" || s == "<nil>" {
			return "–"
		}
		return s
	},
	"shown":  shown,
	"pretty": prettyJSON,
	"tokens": func(u *state.TokenUsage) string {
		if u == nil {
			return "–"
		}
		return shortNum(float64(u.InputTokens)) + " in, " + shortNum(float64(u.OutputTokens)) + " out"
	},
	"link":       link,
	"attemptURL": func(id string) string { return link("attempt", "id", id) },
	"fileURL": func(id, sha string) string {
		if sha == "" {
			sha = "events"
		}
		return link("attempt/file", "id", id, "f", sha)
	},
	"groupURL": func(g, run string) string { return link("group", "g", g, "run", run) },
	"filterURL": func(g, run, filter, against string) string {
		if filter == filterAll {
			filter = ""
		}
		return link("group", "g", g, "run", run, "show", filter, "against", against)
	},
	"pageURL": func(g, run, filter, against string, page int) string {
		if filter == filterAll {
			filter = ""
		}
		return link("group", "g", g, "run", run, "show", filter, "against", against, "page", strconv.Itoa(page))
	},
	"taskURL":    func(g, task, run string) string { return link("task", "g", g, "t", task, "run", run) },
	"compareURL": func(a, b string) string { return link("compare", "a", a, "b", b) },
	"judgeOf": func(a *results.Attempt, name string) string {
		j, ok := a.Judges[name]
		switch {
		case !ok:
			return "–"
		case j.Score == nil:
			return "error"
		}
		return rewardText(j.Score)
	},
	"estOf": func(m map[string]*results.Estimate, k string) *results.Estimate { return m[k] },
	"classes": func(c results.Counts) string {
		var parts []string
		for _, k := range sortedKeys(c.ByClass) {
			parts = append(parts, fmt.Sprintf("%d %s", c.ByClass[k], k))
		}
		return strings.Join(parts, ", ")
	},
	"statusClass": func(a *results.Attempt) string {
		switch {
		case !a.Ended():
			return "running"
		case a.Passed():
			return "pass"
		case a.Class == state.ClassInterrupted:
			return "interrupted"
		case a.Reward == nil:
			return "error"
		}
		return "fail"
	},
	"rateClass": func(e *results.Estimate) string {
		switch {
		case e == nil:
			return "none"
		case e.Mean >= 0.8:
			return "hi"
		case e.Mean >= 0.4:
			return "mid"
		}
		return "lo"
	},
	"f1":   func(x float64) string { return fmt.Sprintf("%.1f", x) },
	"add":  func(a, b int) int { return a + b },
	"plus": func(a, b float64) float64 { return a + b },
	"sub":  func(a, b float64) float64 { return a - b },
	"plural": func(n int, one, many string) string {
		if n == 1 {
			return fmt.Sprintf("%d %s", n, one)
		}
		return fmt.Sprintf("%d %s", n, many)
	},
	"upper":   strings.ToUpper,
	"rawText": func(b json.RawMessage) string { return shown(string(b)) },
}

func rewardText(p *float64) string {
	if p == nil {
		return "–"
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", *p), "0"), ".")
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// shown is agent-written text as a page shows it: cut at maxShown (on a
// rune boundary, saying how much was left out), invalid UTF-8 and control
// characters other than newline and tab replaced, bidirectional controls
// made visible. The template escapes the result.
func shown(s string) string {
	cut := 0
	if len(s) > maxShown {
		cut = len(s) - maxShown
		s = s[:maxShown]
		for len(s) > 0 && !utf8.RuneStart(s[len(s)-1]) {
			s = s[:len(s)-1] // a rune cut in two
		}
		if len(s) > 0 && s[len(s)-1] >= utf8.RuneSelf {
			s = s[:len(s)-1]
		}
	}
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == utf8.RuneError, unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r), r == '\u2028', r == '\u2029':
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if cut > 0 {
		s += fmt.Sprintf("\n… %s more (download the event log for all of it)", formatBytes(int64(cut)))
	}
	return s
}

// prettyJSON is a JSON value indented for reading (a string value as its
// text), cut as shown cuts.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return shown(s)
	}
	if len(raw) > maxShown {
		return shown(string(raw))
	}
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return shown(string(raw))
	}
	return shown(buf.String())
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
