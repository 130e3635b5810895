package web

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	gmhtml "github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"

	"github.com/hemra-dev/hemra/planner"
	"github.com/hemra-dev/hemra/state"
)

// PlanSource is where the plan pages find saved plans (hemra plan -out):
// the files named on the command line, and the *.hplan files at the top of
// the eval directory, listed afresh on every request. A URL names a plan by
// the name this listing gives it, never by a path.
type PlanSource struct {
	Files []string // absolute paths
	Dir   string   // scanned for *.hplan; "" for none
}

// PlanFile is one saved plan the plan pages offer.
type PlanFile struct {
	Name     string    `json:"name"`
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	URL      string    `json:"url"`
}

// List is every plan file, named uniquely by its base name (a second
// file of the same name gets "~2", ...).
func (ps PlanSource) List() []PlanFile {
	paths := append([]string(nil), ps.Files...)
	if ps.Dir != "" {
		found, _ := filepath.Glob(filepath.Join(ps.Dir, "*.hplan"))
		sort.Strings(found)
		for _, f := range found {
			dup := false
			for _, p := range paths {
				dup = dup || filepath.Clean(p) == filepath.Clean(f)
			}
			if !dup {
				paths = append(paths, f)
			}
		}
	}
	out := []PlanFile{}
	seen := map[string]int{}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		name := filepath.Base(p)
		seen[name]++
		if n := seen[name]; n > 1 {
			name = fmt.Sprintf("%s~%d", name, n)
		}
		out = append(out, PlanFile{Name: name, Path: p, Size: st.Size(), Modified: st.ModTime().UTC(), URL: link("plan", "name", name)})
	}
	return out
}

func (s *Server) plansPage(r *http.Request) (*page, error) {
	d := map[string]any{"plans": s.opts.Plans.List(), "dir": s.opts.Plans.Dir}
	return &page{Title: "Saved plans", Template: "plans", Data: d, Crumbs: []crumb{{"plans", ""}}}, nil
}

type planData struct {
	File PlanFile      `json:"file"`
	Plan *planner.Plan `json:"plan"`
	// View is markdown (as the pull-request comment shows it), text (as
	// hemra plan prints it) or detailed (every attempt, as text).
	View     string        `json:"-"`
	HTML     template.HTML `json:"-"`
	Markdown string        `json:"-"`
}

var planViews = []string{"markdown", "text", "detailed"}

func (s *Server) planPage(r *http.Request) (*page, error) {
	name := r.URL.Query().Get("name")
	var file *PlanFile
	for _, f := range s.opts.Plans.List() {
		if f.Name == name {
			file = &f
			break
		}
	}
	if file == nil {
		return nil, fmt.Errorf("no saved plan %q (the plans page lists them): %w", name, state.ErrNotFound)
	}
	plan, err := planner.ReadPlanFile(file.Path)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	d := &planData{File: *file, Plan: plan, View: r.URL.Query().Get("view")}
	if d.View == "" {
		d.View = "markdown"
	}
	var buf bytes.Buffer
	switch d.View {
	case "markdown":
		if err := planner.RenderMarkdown(&buf, plan, planner.MarkdownOptions{}); err != nil {
			return nil, err
		}
		d.Markdown = buf.String()
		if d.HTML, err = markdownHTML(buf.Bytes()); err != nil {
			return nil, err
		}
	case "text", "detailed":
		if err := planner.RenderText(&buf, plan, planner.TextOptions{Color: true, Detailed: d.View == "detailed"}); err != nil {
			return nil, err
		}
		d.HTML = ansiHTML(buf.String())
	default:
		return nil, badRequest("view=%q: the views are %s", d.View, strings.Join(planViews, ", "))
	}
	return &page{Title: "Plan " + file.Name, Template: "plan", Data: d, Crumbs: []crumb{{"plans", "/plans"}, {file.Name, ""}}}, nil
}

// markdownHTML renders Markdown as GitHub does (CommonMark and GFM),
// with the HTML GitHub keeps in a comment reduced to a few bare tags:
// <details>, <summary>, <b>, <i>, <em>, <strong>, <code>, <kbd>,
// <sub>, <sup>, <br>, <p>, without attributes. Any
// other tag, and every attribute, is shown as text. goldmark escapes text
// and drops dangerous link targets.
func markdownHTML(src []byte) (template.HTML, error) {
	md := goldmark.New(
		goldmark.WithExtensions(extension.GFM),
		goldmark.WithRendererOptions(gmhtml.WithUnsafe(), renderer.WithNodeRenderers(util.Prioritized(rawHTMLFilter{}, 0))),
	)
	var buf bytes.Buffer
	if err := md.Convert(src, &buf); err != nil {
		return "", err
	}
	return template.HTML(buf.String()), nil //nolint:gosec // escaped by goldmark, raw HTML filtered by rawHTMLFilter
}

// rawHTMLFilter renders goldmark's raw HTML nodes through allowTags.
type rawHTMLFilter struct{}

func (rawHTMLFilter) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindRawHTML, func(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			raw := n.(*ast.RawHTML)
			for i := 0; i < raw.Segments.Len(); i++ {
				seg := raw.Segments.At(i)
				_, _ = w.WriteString(allowTags(string(seg.Value(src))))
			}
		}
		return ast.WalkSkipChildren, nil
	})
	reg.Register(ast.KindHTMLBlock, func(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			b := n.(*ast.HTMLBlock)
			for i := 0; i < b.Lines().Len(); i++ {
				seg := b.Lines().At(i)
				_, _ = w.WriteString(allowTags(string(seg.Value(src))))
			}
			if b.HasClosure() {
				_, _ = w.WriteString(allowTags(string(b.ClosureLine.Value(src))))
			}
		}
		return ast.WalkSkipChildren, nil
	})
}

var (
	tagRe      = regexp.MustCompile(`<[^<>]*>`)
	allowedTag = regexp.MustCompile(`^</?(details|summary|b|i|em|strong|code|kbd|sub|sup|br|p)\s*/?>$`)
	entityRe   = regexp.MustCompile(`^&(#[0-9]{1,7}|#x[0-9a-fA-F]{1,6}|[a-zA-Z][a-zA-Z0-9]{1,31});`)
)

// allowTags keeps the allowed bare tags and HTML comments out, and
// escapes everything else (character references are kept: they cannot
// make a tag).
func allowTags(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range tagRe.FindAllStringIndex(s, -1) {
		b.WriteString(escapeText(s[last:m[0]]))
		tag := s[m[0]:m[1]]
		switch {
		case allowedTag.MatchString(tag):
			b.WriteString(strings.ToLower(tag))
		case strings.HasPrefix(tag, "<!--") && strings.HasSuffix(tag, "-->"):
			// a comment (the plan's marker) shows nothing, as on GitHub
		default:
			b.WriteString(template.HTMLEscapeString(tag))
		}
		last = m[1]
	}
	b.WriteString(escapeText(s[last:]))
	return b.String()
}

func escapeText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '&' {
			if m := entityRe.FindString(s[i:]); m != "" {
				b.WriteString(m)
				i += len(m)
				continue
			}
		}
		b.WriteString(template.HTMLEscapeString(s[i : i+1]))
		i++
	}
	return b.String()
}

// ansiHTML turns the plan's coloured text into escaped HTML with a span
// per colour: the SGR codes the planner writes (reset, bold, red, green,
// yellow, cyan); any other escape sequence is dropped.
func ansiHTML(s string) template.HTML {
	var b strings.Builder
	open := 0
	for len(s) > 0 {
		i := strings.IndexByte(s, 0x1b)
		if i < 0 {
			b.WriteString(template.HTMLEscapeString(s))
			break
		}
		b.WriteString(template.HTMLEscapeString(s[:i]))
		s = s[i:]
		end := strings.IndexByte(s, 'm')
		if len(s) < 2 || s[1] != '[' || end < 0 {
			s = s[1:]
			continue
		}
		code := s[2:end]
		s = s[end+1:]
		class := map[string]string{"1": "b", "31": "red", "32": "green", "33": "yellow", "36": "cyan"}[code]
		switch {
		case code == "0" || code == "":
			for ; open > 0; open-- {
				b.WriteString("</span>")
			}
		case class != "":
			b.WriteString(`<span class="ansi-` + class + `">`)
			open++
		}
	}
	for ; open > 0; open-- {
		b.WriteString("</span>")
	}
	return template.HTML(b.String()) //nolint:gosec // every byte of text went through HTMLEscapeString
}
