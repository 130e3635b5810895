package config

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// maxFilesetEntries bounds the walk of fileset() so a pattern over a huge
// tree fails clearly instead of hanging.
const maxFilesetEntries = 100000

// functions returns the function library of the language. Everything that
// exists in go-cty's stdlib or HCL's extensions is taken from there; only
// the file, hashing and encoding functions Terraform users expect are
// written here. dir is the eval directory: file functions read only inside
// it.
func functions(dir string) map[string]function.Function {
	fsys := evalDirFS{dir: dir}
	return map[string]function.Function{
		// numbers
		"abs":      stdlib.AbsoluteFunc,
		"ceil":     stdlib.CeilFunc,
		"floor":    stdlib.FloorFunc,
		"log":      stdlib.LogFunc,
		"max":      stdlib.MaxFunc,
		"min":      stdlib.MinFunc,
		"parseint": stdlib.ParseIntFunc,
		"pow":      stdlib.PowFunc,
		"signum":   stdlib.SignumFunc,
		// strings
		"chomp":       stdlib.ChompFunc,
		"endswith":    endsWithFunc,
		"format":      stdlib.FormatFunc,
		"formatlist":  stdlib.FormatListFunc,
		"indent":      stdlib.IndentFunc,
		"join":        stdlib.JoinFunc,
		"lower":       stdlib.LowerFunc,
		"regex":       stdlib.RegexFunc,
		"regexall":    stdlib.RegexAllFunc,
		"replace":     stdlib.ReplaceFunc,
		"split":       stdlib.SplitFunc,
		"startswith":  startsWithFunc,
		"strcontains": strContainsFunc,
		"strlen":      stdlib.StrlenFunc,
		"strrev":      stdlib.ReverseFunc,
		"substr":      stdlib.SubstrFunc,
		"title":       stdlib.TitleFunc,
		"trim":        stdlib.TrimFunc,
		"trimprefix":  stdlib.TrimPrefixFunc,
		"trimspace":   stdlib.TrimSpaceFunc,
		"trimsuffix":  stdlib.TrimSuffixFunc,
		"upper":       stdlib.UpperFunc,
		// collections
		"chunklist":       stdlib.ChunklistFunc,
		"coalesce":        stdlib.CoalesceFunc,
		"coalescelist":    stdlib.CoalesceListFunc,
		"compact":         stdlib.CompactFunc,
		"concat":          stdlib.ConcatFunc,
		"contains":        stdlib.ContainsFunc,
		"distinct":        stdlib.DistinctFunc,
		"element":         stdlib.ElementFunc,
		"flatten":         stdlib.FlattenFunc,
		"keys":            stdlib.KeysFunc,
		"length":          stdlib.LengthFunc,
		"lookup":          stdlib.LookupFunc,
		"merge":           stdlib.MergeFunc,
		"range":           stdlib.RangeFunc,
		"reverse":         stdlib.ReverseListFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"setproduct":      stdlib.SetProductFunc,
		"setsubtract":     stdlib.SetSubtractFunc,
		"setunion":        stdlib.SetUnionFunc,
		"slice":           stdlib.SliceFunc,
		"sort":            stdlib.SortFunc,
		"values":          stdlib.ValuesFunc,
		"zipmap":          stdlib.ZipmapFunc,
		// encoding
		"base64decode": base64DecodeFunc,
		"base64encode": base64EncodeFunc,
		"csvdecode":    stdlib.CSVDecodeFunc,
		"jsondecode":   stdlib.JSONDecodeFunc,
		"jsonencode":   stdlib.JSONEncodeFunc,
		"urlencode":    urlEncodeFunc,
		// hashing
		"md5":    hashFunc(func(b []byte) []byte { s := md5.Sum(b); return s[:] }),
		"sha1":   hashFunc(func(b []byte) []byte { s := sha1.Sum(b); return s[:] }),
		"sha256": hashFunc(func(b []byte) []byte { s := sha256.Sum256(b); return s[:] }),
		"sha512": hashFunc(func(b []byte) []byte { s := sha512.Sum512(b); return s[:] }),
		// time
		"formatdate": stdlib.FormatDateFunc,
		"timeadd":    stdlib.TimeAddFunc,
		// types
		"can":      tryfunc.CanFunc,
		"tobool":   stdlib.MakeToFunc(cty.Bool),
		"tolist":   stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":    stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber": stdlib.MakeToFunc(cty.Number),
		"toset":    stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring": stdlib.MakeToFunc(cty.String),
		"try":      tryfunc.TryFunc,
		// files, relative to the eval directory
		"file":       fsys.fileFunc(),
		"filebase64": fsys.fileBase64Func(),
		"fileexists": fsys.fileExistsFunc(),
		"fileset":    fsys.filesetFunc(),
		"filesha256": fsys.fileSHA256Func(),
	}
}

// FunctionNames lists the language's functions, sorted (for docs and
// tests).
func FunctionNames() []string {
	var names []string
	for n := range functions("") {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var stringParam = []function.Parameter{{Name: "str", Type: cty.String}}

func stringFunc(fn func(s string) (cty.Value, error)) function.Function {
	return function.New(&function.Spec{
		Params: stringParam,
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return fn(args[0].AsString())
		},
	})
}

func hashFunc(sum func([]byte) []byte) function.Function {
	return stringFunc(func(s string) (cty.Value, error) {
		return cty.StringVal(hex.EncodeToString(sum([]byte(s)))), nil
	})
}

var base64EncodeFunc = stringFunc(func(s string) (cty.Value, error) {
	return cty.StringVal(base64.StdEncoding.EncodeToString([]byte(s))), nil
})

var base64DecodeFunc = stringFunc(func(s string) (cty.Value, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return cty.NilVal, function.NewArgErrorf(0, "not valid base64: %v", err)
	}
	if !utf8.Valid(b) {
		return cty.NilVal, function.NewArgErrorf(0, "the decoded bytes are not valid UTF-8")
	}
	return cty.StringVal(string(b)), nil
})

var urlEncodeFunc = stringFunc(func(s string) (cty.Value, error) {
	return cty.StringVal(url.QueryEscape(s)), nil
})

func twoStringBool(fn func(a, b string) bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "str", Type: cty.String}, {Name: "substr", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.BoolVal(fn(args[0].AsString(), args[1].AsString())), nil
		},
	})
}

var (
	startsWithFunc  = twoStringBool(strings.HasPrefix)
	endsWithFunc    = twoStringBool(strings.HasSuffix)
	strContainsFunc = twoStringBool(strings.Contains)
)

// evalDirFS resolves file function paths against the eval directory and
// refuses any path (or symlink) that leads outside it: a configuration is
// reviewed as a unit, and reading ~/.ssh from it would defeat the review.
type evalDirFS struct{ dir string }

func (e evalDirFS) resolve(p string) (string, error) {
	if e.dir == "" {
		return "", fmt.Errorf("file functions are not available here")
	}
	full := p
	if !filepath.IsAbs(full) {
		full = filepath.Join(e.dir, p)
	}
	full = filepath.Clean(full)
	root, err := filepath.EvalSymlinks(e.dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		if os.IsNotExist(err) {
			return "", fmt.Errorf("no file %q in the eval directory", p)
		}
		return "", err
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%q is outside the eval directory; file functions read only inside it", p)
	}
	return real, nil
}

func (e evalDirFS) read(p string) ([]byte, error) {
	real, err := e.resolve(p)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%q is not a regular file", p)
	}
	return os.ReadFile(real)
}

func (e evalDirFS) pathFunc(fn func(p string) (cty.Value, error)) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}},
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			v, err := fn(args[0].AsString())
			if err != nil {
				return cty.NilVal, function.NewArgError(0, err)
			}
			return v, nil
		},
	})
}

func (e evalDirFS) fileFunc() function.Function {
	return e.pathFunc(func(p string) (cty.Value, error) {
		b, err := e.read(p)
		if err != nil {
			return cty.NilVal, err
		}
		if !utf8.Valid(b) {
			return cty.NilVal, fmt.Errorf("%q is not valid UTF-8; use filebase64 for binary files", p)
		}
		return cty.StringVal(string(b)), nil
	})
}

func (e evalDirFS) fileBase64Func() function.Function {
	return e.pathFunc(func(p string) (cty.Value, error) {
		b, err := e.read(p)
		if err != nil {
			return cty.NilVal, err
		}
		return cty.StringVal(base64.StdEncoding.EncodeToString(b)), nil
	})
}

func (e evalDirFS) fileSHA256Func() function.Function {
	return e.pathFunc(func(p string) (cty.Value, error) {
		b, err := e.read(p)
		if err != nil {
			return cty.NilVal, err
		}
		s := sha256.Sum256(b)
		return cty.StringVal(hex.EncodeToString(s[:])), nil
	})
}

func (e evalDirFS) fileExistsFunc() function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p := args[0].AsString()
			real, err := e.resolve(p)
			if err != nil {
				if strings.Contains(err.Error(), "no file") {
					return cty.False, nil
				}
				return cty.NilVal, function.NewArgError(0, err)
			}
			st, err := os.Stat(real)
			return cty.BoolVal(err == nil && st.Mode().IsRegular()), nil
		},
	})
}

// filesetFunc is fileset(path, pattern): the regular files under path
// whose path relative to it matches pattern ("*" within a name, "**" across
// folders), as a set of slash-separated relative paths.
func (e evalDirFS) filesetFunc() function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}, {Name: "pattern", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Set(cty.String)),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			base, pattern := args[0].AsString(), args[1].AsString()
			if _, err := path.Match(strings.ReplaceAll(pattern, "**", "*"), ""); err != nil {
				return cty.NilVal, function.NewArgErrorf(1, "invalid pattern %q: %v", pattern, err)
			}
			root, err := e.resolve(base)
			if err != nil {
				return cty.NilVal, function.NewArgError(0, err)
			}
			var matches []cty.Value
			seen := 0
			err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if seen++; seen > maxFilesetEntries {
					return fmt.Errorf("more than %d entries under %q", maxFilesetEntries, base)
				}
				if !d.Type().IsRegular() {
					return nil
				}
				rel, _ := filepath.Rel(root, p)
				rel = filepath.ToSlash(rel)
				if globMatch(pattern, rel) {
					matches = append(matches, cty.StringVal(rel))
				}
				return nil
			})
			if err != nil {
				return cty.NilVal, function.NewArgError(0, err)
			}
			if len(matches) == 0 {
				return cty.SetValEmpty(cty.String), nil
			}
			return cty.SetVal(matches), nil
		},
	})
}

// globMatch matches a slash-separated path against a pattern whose "**"
// segments match any number of folders.
func globMatch(pattern, name string) bool {
	return matchSegments(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchSegments(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchSegments(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}
