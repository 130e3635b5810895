package state

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unsafe"
)

// state check reads every attempt record, and encoding/json is most of
// its time: it scans a record twice (once to validate, once to decode) and
// decodes every field, where the check needs a dozen. scanRecord reads
// those fields in one pass and validates the rest without decoding it.
//
// It is exact or it declines: whatever it takes, encoding/json would take
// with the same values (FuzzRecordDecoders holds it to that). Anything it
// does not know — a key that is not a field (encoding/json would match it
// regardless of case), a key written twice, an escaped key, an outcome
// with lists (artifacts, logs, commands, judges: read by encoding/json),
// a syntax error — makes it decline, and the record is decoded by
// decodeStored as any reader would, so its error message is theirs.

// recordScan reads one JSON value. bad is set at the first thing the fast
// path does not take; every read after it does nothing. With alias, a
// string without escapes is not copied: it shares b's memory (state.db's
// map), valid only as long as the transaction, and whoever keeps one
// longer copies it.
type recordScan struct {
	b     []byte
	i     int
	bad   bool
	alias bool
}

func (s *recordScan) fail() {
	s.bad = true
	s.i = len(s.b)
}

func (s *recordScan) peek() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// literal reads true, false or null.
func (s *recordScan) literal(word string) {
	if s.peek() != word[0] || len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		s.fail()
		return
	}
	s.i += len(word)
}

// null reads a null if one is next.
func (s *recordScan) null() bool {
	if s.peek() != 'n' {
		return false
	}
	s.literal("null")
	return !s.bad
}

// rawString reads a string: b[start:end] is it with its quotes; plain is
// false when it holds escapes or bytes beyond ASCII (what encoding/json
// decodes or may replace).
func (s *recordScan) rawString() (start, end int, plain bool) {
	if s.peek() != '"' {
		s.fail()
		return 0, 0, false
	}
	start = s.i
	// Most strings hold no escape: up to the next quote, then a look at
	// what lies between.
	if q := bytes.IndexByte(s.b[start+1:], '"'); q >= 0 {
		end = start + 1 + q
		plain = true
		for _, c := range s.b[start+1 : end] {
			if c < 0x20 || c >= 0x80 || c == '\\' {
				plain = false
				break
			}
		}
		if plain {
			s.i = end + 1
			return start, s.i, true
		}
	}
	s.i++
	plain = true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return start, s.i, plain
		case c == '\\':
			plain = false
			if s.i+1 >= len(s.b) {
				s.fail()
				return 0, 0, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) || !isHex4(s.b[s.i+2:s.i+6]) {
					s.fail()
					return 0, 0, false
				}
				s.i += 6
			default:
				s.fail()
				return 0, 0, false
			}
		case c < 0x20:
			s.fail()
			return 0, 0, false
		default:
			if c >= 0x80 {
				plain = false
			}
			s.i++
		}
	}
	s.fail()
	return 0, 0, false
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// str reads a string value (null leaves *p as it is, as encoding/json does).
func (s *recordScan) str(p *string) {
	if s.null() || s.bad {
		return
	}
	start, end, plain := s.rawString()
	switch {
	case s.bad:
	case plain && s.alias && end-start > 2:
		*p = unsafe.String(&s.b[start+1], end-start-2)
	case plain:
		*p = string(s.b[start+1 : end-1])
	default:
		if json.Unmarshal(s.b[start:end], p) != nil {
			s.fail()
		}
	}
}

// number reads a number: its text.
func (s *recordScan) number() []byte {
	s.peek()
	start := s.i
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case digits() == 0:
		s.fail()
		return nil
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			s.fail()
			return nil
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			s.fail()
			return nil
		}
	}
	return s.b[start:s.i]
}

func (s *recordScan) integer(p *int) {
	if s.null() || s.bad {
		return
	}
	n, err := strconv.ParseInt(string(s.number()), 10, 0)
	if err != nil {
		s.fail()
		return
	}
	*p = int(n)
}

func (s *recordScan) float(p **float64) {
	if s.null() || s.bad {
		return
	}
	f, err := strconv.ParseFloat(string(s.number()), 64)
	if err != nil {
		s.fail()
		return
	}
	*p = &f
}

func (s *recordScan) boolean(p *bool) {
	switch s.peek() {
	case 't':
		s.literal("true")
		*p = true
	case 'f':
		s.literal("false")
		*p = false
	default:
		s.literal("null")
	}
}

// time reads a time.Time as encoding/json does: its UnmarshalJSON on the
// value's text.
func (s *recordScan) time(p *time.Time) {
	start := s.peekStart()
	s.skip(0)
	if s.bad || p.UnmarshalJSON(s.b[start:s.i]) != nil {
		s.fail()
	}
}

func (s *recordScan) peekStart() int {
	s.peek()
	return s.i
}

// raw reads any value and returns a copy of its text (a json.RawMessage).
func (s *recordScan) raw() []byte {
	start := s.peekStart()
	s.skip(0)
	if s.bad {
		return nil
	}
	return append([]byte(nil), s.b[start:s.i]...)
}

// decode hands one value to encoding/json: a part the check does not read
// field by field, decoded into its own type so that a value of the wrong
// type is refused as any reader would refuse it.
func (s *recordScan) decode(v any) {
	start := s.peekStart()
	s.skip(0)
	if s.bad || json.Unmarshal(s.b[start:s.i], v) != nil {
		s.fail()
	}
}

// strings reads a []string.
func (s *recordScan) strings(p *[]string) {
	if s.null() || s.bad {
		*p = nil
		return
	}
	var out []string
	for more := s.begin('['); more; more = s.next(']') {
		if out == nil {
			out = make([]string, 0, 8) // one allocation for a record's groups
		}
		var e string
		s.str(&e)
		out = append(out, e)
	}
	if out == nil && !s.bad {
		out = []string{}
	}
	*p = out
}

// begin reads the opening of an object ('{') or array ('[') and reports
// whether an element follows: false for an empty one, and after a fault.
func (s *recordScan) begin(open byte) bool {
	if s.peek() != open {
		s.fail()
		return false
	}
	s.i++
	close := byte('}')
	if open == '[' {
		close = ']'
	}
	if s.peek() == close {
		s.i++
		return false
	}
	return !s.bad
}

// next reads what follows an element: true after a comma, false at the
// end (or after a fault).
func (s *recordScan) next(close byte) bool {
	switch s.peek() {
	case ',':
		s.i++
		return !s.bad
	case close:
		s.i++
		return false
	}
	s.fail()
	return false
}

// key reads an object's key and its colon. An escaped key is left to
// encoding/json (it may spell a field).
func (s *recordScan) key() []byte {
	start, end, plain := s.rawString()
	if !plain || s.peek() != ':' {
		s.fail()
		return nil
	}
	s.i++
	return s.b[start+1 : end-1]
}

// once marks field bit as read: a key written twice is left to
// encoding/json.
func (s *recordScan) once(seen *uint64, bit uint) {
	if *seen&(1<<bit) != 0 {
		s.fail()
	}
	*seen |= 1 << bit
}

// skip reads and validates any value.
func (s *recordScan) skip(depth int) {
	if depth > 1000 {
		s.fail()
		return
	}
	switch c := s.peek(); {
	case c == '{':
		for more := s.begin('{'); more; more = s.next('}') {
			if s.rawString(); s.bad {
				return
			}
			if s.peek() != ':' {
				s.fail()
				return
			}
			s.i++
			s.skip(depth + 1)
		}
	case c == '[':
		for more := s.begin('['); more; more = s.next(']') {
			s.skip(depth + 1)
		}
	case c == '"':
		s.rawString()
	case c == 't':
		s.literal("true")
	case c == 'f':
		s.literal("false")
	case c == 'n':
		s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		s.number()
	default:
		s.fail()
	}
}

// end reports whether nothing but white space is left.
func (s *recordScan) end() bool {
	s.peek()
	return !s.bad && s.i == len(s.b)
}

// scanRecord reads an attempt record as decodeStored does; ok is false
// when it declines (see above). With alias, its strings share val's
// memory (recordScan).
func scanRecord(val []byte, alias bool) (a *Attempt, sm storedManifest, ok bool) {
	s := &recordScan{b: val, alias: alias}
	a = new(Attempt)
	if s.null() {
		return a, sm, s.end()
	}
	var seen uint64
	for more := s.begin('{'); more; more = s.next('}') {
		switch string(s.key()) {
		case "id":
			s.once(&seen, 0)
			s.str(&a.ID)
		case "address":
			s.once(&seen, 1)
			s.str(&a.Address)
		case "run_id":
			s.once(&seen, 2)
			s.str(&a.RunID)
		case "transitions":
			s.once(&seen, 3)
			a.Transitions = s.transitions()
		case "outcome":
			s.once(&seen, 4)
			a.Outcome = s.outcome()
		case "origin":
			s.once(&seen, 5)
			s.decode(&a.Origin)
		case "manifest":
			s.once(&seen, 6)
			s.manifest(&sm)
		default:
			s.fail()
		}
	}
	if !s.end() {
		return nil, sm, false
	}
	a.Manifest = sm.Manifest
	return a, sm, true
}

func (s *recordScan) transitions() []Transition {
	if s.null() || s.bad {
		return nil
	}
	out := []Transition{}
	for more := s.begin('['); more; more = s.next(']') {
		if cap(out) == 0 {
			out = make([]Transition, 0, 4) // pending, agent, verify, finished
		}
		var t Transition
		if !s.null() {
			var seen uint64
			for more := s.begin('{'); more; more = s.next('}') {
				switch string(s.key()) {
				case "status":
					s.once(&seen, 0)
					s.str((*string)(&t.Status))
				case "at":
					s.once(&seen, 1)
					s.time(&t.At)
				case "note":
					s.once(&seen, 2)
					s.str(&t.Note)
				default:
					s.fail()
				}
			}
		}
		out = append(out, t)
	}
	return out
}

// outcome reads an outcome of scalars; one with lists or maps (artifacts,
// logs, commands, judges, rewards, steps, ...) is decoded whole by
// encoding/json.
func (s *recordScan) outcome() *Outcome {
	if s.null() || s.bad {
		return nil
	}
	start := s.peekStart()
	o := new(Outcome)
	whole := false
	var seen uint64
	for more := s.begin('{'); more; more = s.next('}') {
		switch string(s.key()) {
		case "class":
			s.once(&seen, 0)
			s.str((*string)(&o.Class))
		case "reward":
			s.once(&seen, 1)
			s.float(&o.Reward)
		case "error":
			s.once(&seen, 2)
			s.str(&o.Error)
		case "started_at":
			s.once(&seen, 3)
			s.time(&o.StartedAt)
		case "finished_at":
			s.once(&seen, 4)
			s.time(&o.FinishedAt)
		case "agent_exit":
			s.once(&seen, 5)
			s.integer(&o.AgentExit)
		case "agent_result":
			s.once(&seen, 6)
			o.AgentResult = s.raw()
		case "usage":
			s.once(&seen, 7)
			o.Usage = s.raw()
		case "stderr_tail":
			s.once(&seen, 8)
			s.str(&o.StderrTail)
		case "events_log":
			s.once(&seen, 9)
			s.str(&o.EventsLog)
		case "event_count":
			s.once(&seen, 10)
			s.integer(&o.EventCount)
		case "snapshot":
			s.once(&seen, 11)
			s.str(&o.Snapshot)
		case "agent_timed_out":
			s.once(&seen, 12)
			s.boolean(&o.AgentTimedOut)
		case "error_stage":
			s.once(&seen, 13)
			s.str(&o.ErrorStage)
		default:
			whole = true
			s.skip(0)
		}
	}
	if whole && !s.bad {
		o = new(Outcome)
		if json.Unmarshal(s.b[start:s.i], o) != nil {
			s.fail()
		}
	}
	return o
}

func (s *recordScan) manifest(sm *storedManifest) {
	if s.null() || s.bad {
		return
	}
	m := &sm.Manifest
	var seen uint64
	for more := s.begin('{'); more; more = s.next('}') {
		switch string(s.key()) {
		case "format_version":
			s.once(&seen, 0)
			s.integer(&m.FormatVersion)
		case "eval":
			s.once(&seen, 1)
			s.str(&m.Eval)
		case "harness":
			s.once(&seen, 2)
			s.str(&m.Harness)
		case "task":
			s.once(&seen, 3)
			s.str(&m.Task)
		case "repetition":
			s.once(&seen, 4)
			s.integer(&m.Repetition)
		case "agent_fingerprint":
			s.once(&seen, 5)
			s.str(&m.AgentFingerprint)
		case "verify_fingerprint":
			s.once(&seen, 6)
			s.str(&m.VerifyFingerprint)
		case "judge_fingerprint":
			s.once(&seen, 7)
			s.str(&m.JudgeFingerprint)
		case "inputs":
			s.once(&seen, 8)
			m.Inputs = s.inputs()
		case "images":
			s.once(&seen, 9)
			s.decode(&m.Images)
		case "sandbox":
			s.once(&seen, 10)
			s.sandbox(&m.Sandbox)
		case "env_names":
			s.once(&seen, 11)
			s.strings(&m.EnvNames)
		case "reused_agent_from":
			s.once(&seen, 12)
			s.str(&m.ReusedAgentFrom)
		case "verifier_mode":
			s.once(&seen, 13)
			s.str(&m.VerifierMode)
		case "verifier_settings":
			s.once(&seen, 14)
			m.VerifierSettings = s.raw()
		case "steps":
			s.once(&seen, 15)
			s.decode(&m.Steps)
		case "task_problem":
			s.once(&seen, 16)
			s.str(&m.TaskProblem)
		case "input_groups":
			s.once(&seen, 17)
			s.strings(&sm.InputGroups)
		case "context":
			s.once(&seen, 18)
			s.str(&sm.Context)
		case "chained":
			s.once(&seen, 19)
			s.boolean(&sm.Chained)
		default:
			s.fail()
		}
	}
}

// sandbox reads the one sandbox record a grouped manifest keeps inline
// ({"kind":""}); any other is decoded by encoding/json.
func (s *recordScan) sandbox(p *SandboxRecord) {
	const empty = `{"kind":""}`
	if s.peek() == '{' && len(s.b)-s.i >= len(empty) && string(s.b[s.i:s.i+len(empty)]) == empty {
		s.i += len(empty)
		*p = SandboxRecord{}
		return
	}
	s.decode(p)
}

// inputs reads a manifest's inputs.
func (s *recordScan) inputs() []Input {
	if s.null() || s.bad {
		return nil
	}
	out := []Input{}
	for more := s.begin('['); more; more = s.next(']') {
		if cap(out) == 0 {
			out = make([]Input, 0, 16)
		}
		var in Input
		if !s.null() {
			var seen uint64
			for more := s.begin('{'); more; more = s.next('}') {
				switch string(s.key()) {
				case "stage":
					s.once(&seen, 0)
					s.str(&in.Stage)
				case "path":
					s.once(&seen, 1)
					s.str(&in.Path)
				case "value":
					s.once(&seen, 2)
					s.str(&in.Value)
				case "blob":
					s.once(&seen, 3)
					s.str(&in.Blob)
				default:
					s.fail()
				}
			}
		}
		out = append(out, in)
	}
	return out
}
