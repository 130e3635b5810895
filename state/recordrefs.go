package state

import (
	"bytes"
	"fmt"
)

// RecordRefs is RecordGroups without the inputs kept in the record: the
// ids of the record's input groups and of its context group, which is all
// a planner needs to tell which groups of a new manifest differ from an
// earlier attempt's. Whole is true for a record that keeps its manifest
// inline (see RecordGroups): read it with Attempt.
//
// A plan where every attempt re-runs reads one record per attempt, a
// million of them, so the records hemra writes (json.Marshal's compact
// objects) are scanned by hand: no reflection, one allocation. A record
// the scan is not sure of (a key with an escape, a key that differs from
// one it looks for in case only: encoding/json would match it; a second
// manifest, which encoding/json merges into the first; anything not JSON)
// is read by RecordGroups. The two agree on every record
// encodeRecord writes; the scan checks the JSON but not the types of the
// fields it skips, which Attempt and `state check` do.
func (v *View) RecordRefs(id string) (inputGroups []string, context string, whole bool, err error) {
	val := v.get(bucketAttempts, id)
	if val == nil {
		return nil, "", false, fmt.Errorf("attempt %q: %w", id, ErrNotFound)
	}
	val, err = unpackValue(val)
	if err != nil {
		return nil, "", false, fmt.Errorf("attempt %q: %w", id, err)
	}
	if packed(val) {
		// A format-4 record is compressed; one that does not decompress
		// is RecordGroups's to report.
		if val, err = unpackValue(val); err != nil {
			rg, whole, err := v.RecordGroups(id)
			return rg.InputGroups, rg.Context, whole, err
		}
	}
	if ids, ctx, ok := scanRecordRefs(val); ok {
		if ctx == "" {
			return nil, "", true, nil
		}
		return ids, ctx, false, nil
	}
	rg, whole, err := v.RecordGroups(id)
	return rg.InputGroups, rg.Context, whole, err
}

// scanRecordRefs reads manifest.input_groups and manifest.context of a
// record, ok false when it cannot be sure of the answer encoding/json
// would give.
func scanRecordRefs(val []byte) (ids []string, context string, ok bool) {
	s := refScan{b: val}
	s.space()
	var manifest []byte
	found := false
	if !s.object(func(key []byte) bool {
		if !bytes.Equal(key, []byte("manifest")) {
			if bytes.EqualFold(key, []byte("manifest")) {
				return false
			}
			return s.skip()
		}
		if found {
			// encoding/json decodes a repeated object into what the
			// first one set, keeping its fields: not the scan's to merge.
			return false
		}
		start := s.i
		if !s.skip() {
			return false
		}
		manifest, found = val[start:s.i], true
		return true
	}) {
		return nil, "", false
	}
	s.space()
	if s.i != len(val) || !found || len(manifest) == 0 || manifest[0] != '{' {
		// No manifest, or null: RecordGroups says so.
		return nil, "", false
	}
	// One string for every id the record names, each sliced from it.
	text := string(manifest)
	m := refScan{b: manifest}
	ok = m.object(func(key []byte) bool {
		switch {
		case bytes.Equal(key, []byte("input_groups")):
			ids = ids[:0]
			if m.literal("null") {
				ids = nil
				return true
			}
			return m.array(func() bool {
				start, end, plain := m.str()
				if !plain {
					return false
				}
				ids = append(ids, text[start:end])
				return true
			})
		case bytes.Equal(key, []byte("context")):
			if m.literal("null") {
				return true // null leaves a string as it was
			}
			start, end, plain := m.str()
			context = text[start:end]
			return plain
		case bytes.EqualFold(key, []byte("input_groups")), bytes.EqualFold(key, []byte("context")):
			return false
		}
		return m.skip()
	})
	if !ok {
		return nil, "", false
	}
	return ids, context, true
}

// refScan walks JSON text without decoding it, refusing what encoding/json
// refuses (it never accepts a text encoding/json would not).
type refScan struct {
	b []byte
	i int
}

func (s *refScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// object walks an object, calling member with each key (a key with an
// escape refuses the scan) positioned at its value, which member consumes.
func (s *refScan) object(member func(key []byte) bool) bool {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		s.space()
		start, end, plain := s.str()
		if !plain {
			return false
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		if !member(s.b[start:end]) {
			return false
		}
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// array walks an array, calling elem positioned at each element.
func (s *refScan) array(elem func() bool) bool {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return false
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for {
		s.space()
		if !elem() {
			return false
		}
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string without escapes: its content is b[start:end]. plain
// is false for anything else (an escape, a control byte, a byte that is
// not ASCII, which encoding/json may replace, or no string at all).
func (s *refScan) str() (start, end int, plain bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return 0, 0, false
	}
	start = s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return start, j, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return 0, 0, false
		}
	}
	return 0, 0, false
}

func (s *refScan) literal(lit string) bool {
	if bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		s.i += len(lit)
		return true
	}
	return false
}

// skip consumes one value of any kind.
func (s *refScan) skip() bool {
	s.space()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(func([]byte) bool { return s.skip() })
	case c == '[':
		return s.array(s.skip)
	case c == '"':
		return s.skipString()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

// skipString consumes a string, escapes and UTF-8 included (what
// encoding/json would replace it still accepts).
func (s *refScan) skipString() bool {
	s.i++
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				s.i += 6
			default:
				return false
			}
		default:
			s.i++
		}
	}
	return false
}

// number consumes a number as JSON writes one.
func (s *refScan) number() bool {
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if digits() == 0 {
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}
