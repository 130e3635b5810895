package config

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// sensitiveMark marks values derived from a sensitive variable. HCL's
// diagnostic writer does not print marked values.
const sensitiveMark = "sensitive"

// VarFileSuffix is the extension of variables files: *.auto.hclvars are
// read automatically, others with -var-file.
const VarFileSuffix = ".hclvars"

type varDecl struct {
	v           *Variable
	block       *hcl.Block
	validations []*hcl.Block
	// valueRange is where the final value was written, when in a file.
	valueRange *hcl.Range
	// failed is set when a value was given but refused (already reported).
	failed bool
}

// evalVariables decodes the variable blocks and assigns each its value:
// default, then HEMRA_VAR_<name>, then *.auto.hclvars in name order, then
// -var-file files, then -var flags, each overriding the ones before.
func (l *loader) evalVariables() {
	decls := map[string]*varDecl{}
	var order []string
	for _, b := range l.varBlocks {
		name := b.Labels[0]
		if prev, ok := decls[name]; ok {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  fmt.Sprintf("Duplicate variable %q", name),
				Detail:   fmt.Sprintf("A variable named %q was already declared at %s.", name, prev.block.DefRange),
				Subject:  b.LabelRanges[0].Ptr(),
			})
			continue
		}
		if d := l.decodeVariable(b); d != nil {
			decls[name] = d
			order = append(order, name)
			l.cfg.Variables[name] = d.v
		}
	}

	// HEMRA_VAR_<name>, exact name as declared (like TF_VAR_).
	for _, kv := range l.opts.Environ {
		k, raw, ok := strings.Cut(kv, "=")
		name, isVar := strings.CutPrefix(k, "HEMRA_VAR_")
		if !ok || !isVar {
			continue
		}
		if d := decls[name]; d != nil {
			l.assignRaw(d, raw, "env", "environment variable "+k)
		}
	}

	// *.auto.hclvars, in name order.
	entries, _ := os.ReadDir(l.cfg.Dir)
	var autos []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".auto"+VarFileSuffix) {
			autos = append(autos, e.Name())
		}
	}
	sort.Strings(autos)
	for _, name := range autos {
		l.readVarFile(filepath.Join(l.cfg.Dir, name), name, decls)
	}
	for _, p := range l.opts.VarFiles {
		full := p
		if !filepath.IsAbs(full) {
			full = filepath.Join(l.cfg.Dir, p)
		}
		l.readVarFile(full, p, decls)
		l.cfg.VarFileNames = append(l.cfg.VarFileNames, p)
	}
	for _, arg := range l.opts.Vars {
		name, raw, ok := strings.Cut(arg, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid -var option",
				Detail:   fmt.Sprintf("The -var option %q is not NAME=VALUE.", arg),
			})
			continue
		}
		d := decls[name]
		if d == nil {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Value for undeclared variable",
				Detail:   fmt.Sprintf("-var sets %q, but no variable of that name is declared.%s", name, suggest(name, order)),
			})
			continue
		}
		l.assignRaw(d, raw, "-var", "-var "+name)
	}

	l.assignSaved(decls, order)

	vars := map[string]cty.Value{}
	for _, name := range order {
		d := decls[name]
		if d.v.Value == cty.NilVal {
			if l.opts.UnsetVariablesUnknown || d.failed {
				d.v.Value = cty.UnknownVal(d.v.Type)
			} else {
				l.diags = append(l.diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "No value for required variable",
					Detail: fmt.Sprintf("Variable %q has no default. Set it with -var %s=VALUE, a -var-file, a *.auto.hclvars file or HEMRA_VAR_%s.",
						name, name, name),
					Subject: d.block.DefRange.Ptr(),
				})
				d.v.Value = cty.UnknownVal(d.v.Type)
			}
		}
		if d.v.Sensitive {
			d.v.Value = d.v.Value.Mark(sensitiveMark)
		}
		vars[name] = d.v.Value
	}
	l.ctx.Variables["var"] = cty.ObjectVal(vars)
	for _, name := range order {
		l.checkValidations(decls[name])
	}
}

func (l *loader) decodeVariable(b *hcl.Block) *varDecl {
	content, diags := b.Body.Content(blockSchemas[blockVariable])
	l.diags = append(l.diags, diags...)
	d := &varDecl{block: b, v: &Variable{Name: b.Labels[0], Type: cty.DynamicPseudoType, DeclRange: b.DefRange}}
	attrs := content.Attributes
	if a := attrs["type"]; a != nil {
		ty, diags := typeexpr.TypeConstraint(a.Expr)
		l.diags = append(l.diags, diags...)
		if !diags.HasErrors() {
			d.v.Type = ty
		}
	}
	noVars := &hcl.EvalContext{Functions: l.ctx.Functions}
	if a := attrs["description"]; a != nil {
		v, diags := a.Expr.Value(noVars)
		l.diags = append(l.diags, diags...)
		if s, err := convert.Convert(v, cty.String); err == nil && !s.IsNull() && s.IsKnown() {
			d.v.Description = s.AsString()
		} else if !diags.HasErrors() {
			l.diags = append(l.diags, typeDiag(a, "a string"))
		}
	}
	if a := attrs["sensitive"]; a != nil {
		v, diags := a.Expr.Value(noVars)
		l.diags = append(l.diags, diags...)
		if bv, err := convert.Convert(v, cty.Bool); err == nil && !bv.IsNull() && bv.IsKnown() {
			d.v.Sensitive = bv.True()
		} else if !diags.HasErrors() {
			l.diags = append(l.diags, typeDiag(a, "a bool"))
		}
	}
	if a := attrs["default"]; a != nil {
		// Defaults are literal: they may call functions but not refer to
		// anything, since variables are evaluated before everything else.
		v, diags := a.Expr.Value(noVars)
		l.diags = append(l.diags, diags...)
		if !diags.HasErrors() {
			d.v.Default = l.convertVar(d, v, a.Expr.Range().Ptr(), "default")
			if d.v.Default != cty.NilVal && !v.IsNull() {
				d.v.Value, d.v.Source = d.v.Default, "default"
				d.valueRange = a.Expr.Range().Ptr()
			}
		}
	}
	for _, vb := range content.Blocks {
		_, diags := vb.Body.Content(validationSchema)
		l.diags = append(l.diags, diags...)
		if !diags.HasErrors() {
			d.validations = append(d.validations, vb)
		}
	}
	return d
}

func typeDiag(a *hcl.Attribute, want string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Incorrect attribute value type",
		Detail:   fmt.Sprintf("Inappropriate value for attribute %q: %s required.", a.Name, want),
		Subject:  a.Expr.Range().Ptr(),
	}
}

// convertVar converts a value to the variable's type, reporting at rng
// (nil for command-line and environment values) what went wrong.
func (l *loader) convertVar(d *varDecl, v cty.Value, rng *hcl.Range, from string) cty.Value {
	out, err := convert.Convert(v, d.v.Type)
	if err != nil {
		d.failed = true
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for variable",
			Detail:   fmt.Sprintf("The value from %s is not suitable for variable %q (%s required): %v.", from, d.v.Name, d.v.Type.FriendlyName(), err),
			Subject:  rng,
		})
		return cty.NilVal
	}
	return out
}

// assignRaw sets a variable from a string given on the command line or in
// the environment: primitive types take it as written, others parse it
// as an HCL expression (`-var 'tags=["a","b"]'`).
// assignSaved gives each variable a saved plan holds the plan's value,
// refusing a different one from -var or -var-file (the plan was reviewed
// with its own) and warning about a different HEMRA_VAR_ one.
func (l *loader) assignSaved(decls map[string]*varDecl, order []string) {
	if l.opts.Saved == nil {
		return
	}
	names := slices.Sorted(maps.Keys(l.opts.Saved))
	for _, name := range names {
		saved := l.opts.Saved[name]
		d := decls[name]
		if d == nil {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Saved plan sets an undeclared variable",
				Detail:   fmt.Sprintf("The saved plan was made with a value for variable %q, which the configuration no longer declares.%s", name, suggest(name, order)),
			})
			continue
		}
		if d.v.Sensitive {
			continue // never saved; a plan that claims one is refused by its checks
		}
		out := l.convertVar(d, saved, nil, "the saved plan")
		if out == cty.NilVal {
			continue
		}
		if d.v.Value != cty.NilVal && d.v.Source != "default" && !valuesEqual(d.v.Value, out) {
			sev, summary, what := hcl.DiagError, "Can't change variable when applying a saved plan",
				"The plan is applied with the values it was made with."
			if d.v.Source == "env" || strings.HasSuffix(d.v.Source, ".auto"+VarFileSuffix) {
				sev, summary, what = hcl.DiagWarning, "Variable differs from the saved plan's",
					"The saved plan's value is used."
			}
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: sev,
				Summary:  summary,
				Detail: fmt.Sprintf("Variable %q was %s when the plan was made; %s gives %s. %s",
					name, showValue(out), sourceName(d.v.Source, name), showValue(d.v.Value), what),
			})
		}
		d.v.Value, d.v.Source, d.valueRange = out, "plan", nil
	}
}

func valuesEqual(a, b cty.Value) bool {
	a, _ = a.UnmarkDeep()
	b, _ = b.UnmarkDeep()
	if !a.IsWhollyKnown() || !b.IsWhollyKnown() {
		return false
	}
	eq := a.Equals(b)
	return eq.IsKnown() && eq.True()
}

func showValue(v cty.Value) string {
	v, _ = v.UnmarkDeep()
	if v.Type() == cty.String && v.IsKnown() && !v.IsNull() {
		return strconv.Quote(v.AsString())
	}
	if js, err := ctyjson.Marshal(v, v.Type()); err == nil {
		return string(js)
	}
	return v.GoString()
}

func sourceName(source, name string) string {
	switch source {
	case "env":
		return "HEMRA_VAR_" + name
	case "-var":
		return "-var " + name
	}
	return source
}

func (l *loader) assignRaw(d *varDecl, raw, source, from string) {
	var v cty.Value
	if d.v.Type.IsPrimitiveType() || d.v.Type == cty.DynamicPseudoType {
		v = cty.StringVal(raw)
	} else {
		diags := CheckExpressionNesting([]byte(raw), from, hcl.InitialPos)
		var expr hclsyntax.Expression
		if !diags.HasErrors() {
			expr, diags = hclsyntax.ParseExpression([]byte(raw), from, hcl.InitialPos)
		}
		if !diags.HasErrors() {
			v, diags = expr.Value(nil)
		}
		if diags.HasErrors() {
			d.failed = true
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid value for variable",
				Detail:   fmt.Sprintf("The value from %s for variable %q is not a valid %s expression: %s", from, d.v.Name, d.v.Type.FriendlyName(), diags.Error()),
			})
			return
		}
	}
	if out := l.convertVar(d, v, nil, from); out != cty.NilVal {
		d.v.Value, d.v.Source, d.valueRange = out, source, nil
	}
}

func (l *loader) readVarFile(path, name string, decls map[string]*varDecl) {
	f := l.parseFile(path, name)
	if f == nil {
		return
	}
	attrs, diags := f.Body.JustAttributes()
	l.diags = append(l.diags, diags...)
	for _, a := range sortedAttrs(attrs) {
		d := decls[a.Name]
		if d == nil {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Value for undeclared variable",
				Detail:   fmt.Sprintf("%s sets %q, but no variable of that name is declared; the value is ignored.%s", name, a.Name, suggest(a.Name, slices.Sorted(maps.Keys(decls)))),
				Subject:  a.NameRange.Ptr(),
			})
			continue
		}
		v, diags := a.Expr.Value(nil)
		l.diags = append(l.diags, diags...)
		if diags.HasErrors() {
			continue
		}
		if out := l.convertVar(d, v, a.Expr.Range().Ptr(), name); out != cty.NilVal {
			d.v.Value, d.v.Source, d.valueRange = out, name, a.Expr.Range().Ptr()
		}
	}
}

// checkValidations evaluates a variable's validation blocks against its
// final value.
func (l *loader) checkValidations(d *varDecl) {
	if !d.v.Value.IsWhollyKnown() {
		return
	}
	for _, vb := range d.validations {
		content, _ := vb.Body.Content(validationSchema)
		cond, msg := content.Attributes["condition"], content.Attributes["error_message"]
		v, diags := cond.Expr.Value(l.ctx)
		l.diags = append(l.diags, diags...)
		if diags.HasErrors() {
			continue
		}
		v, _ = v.UnmarkDeep()
		b, err := convert.Convert(v, cty.Bool)
		if err != nil || b.IsNull() {
			l.diags = append(l.diags, typeDiag(cond, "a bool"))
			continue
		}
		if !b.IsKnown() || b.True() {
			continue
		}
		text := "The value does not meet the validation rule."
		if m, diags := msg.Expr.Value(l.ctx); !diags.HasErrors() {
			m, _ = m.UnmarkDeep()
			if s, err := convert.Convert(m, cty.String); err == nil && !s.IsNull() && s.IsKnown() {
				text = s.AsString()
			}
		}
		subject := d.valueRange
		where := ""
		if subject == nil {
			subject = cond.Expr.Range().Ptr()
			if d.v.Source != "" {
				where = fmt.Sprintf(" (value from %s)", d.v.Source)
			}
		}
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for variable",
			Detail:   fmt.Sprintf("%s\n\nThis was checked by the validation rule of variable %q at %s%s.", text, d.v.Name, cond.Expr.Range(), where),
			Subject:  subject,
		})
	}
}
