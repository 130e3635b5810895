package state

import (
	"encoding/json"
	"strings"
)

// currentOf is the Current summary of an attempt.
func currentOf(a *Attempt) Current {
	c := Current{
		AttemptID:         a.ID,
		AgentFingerprint:  a.Manifest.AgentFingerprint,
		VerifyFingerprint: a.Manifest.VerifyFingerprint,
		JudgeFingerprint:  a.Manifest.JudgeFingerprint,
		Status:            a.Status(),
	}
	if a.Outcome != nil {
		c.Class = a.Outcome.Class
		c.SnapshotKept = a.Outcome.Snapshot != ""
		c.JudgeRetry = a.Outcome.Class == ClassInfraError && a.Outcome.ErrorStage == StageJudge
	}
	return c
}

func encodeCurrent(c Current) ([]byte, error) { return json.Marshal(c) }

// decodeCurrent decodes a Current value. A no-op plan decodes one per
// declared attempt, so the flat objects encodeCurrent writes are parsed by
// hand: one string allocation per value, which every field then slices.
// Anything else (escapes, unknown keys, other spacing) goes to
// encoding/json, so the fast path only ever agrees with it.
func decodeCurrent(val []byte) (Current, error) {
	if c, ok := decodeCurrentFast(val); ok {
		return c, nil
	}
	var c Current
	err := json.Unmarshal(val, &c)
	return c, err
}

func decodeCurrentFast(val []byte) (Current, bool) {
	var c Current
	s := string(val)
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return c, false
	}
	rest := s[1 : len(s)-1]
	for rest != "" {
		// "k":
		if len(rest) < 4 || rest[0] != '"' || rest[2] != '"' || rest[3] != ':' {
			return c, false
		}
		key := rest[1]
		rest = rest[4:]
		var value string
		var boolean, isBool bool
		switch {
		case strings.HasPrefix(rest, `"`):
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return c, false
			}
			value = rest[1 : 1+end]
			if !plainJSONText(value) {
				return c, false // escapes, control bytes, non-ASCII: encoding/json's
			}
			rest = rest[2+end:]
		case strings.HasPrefix(rest, "true"):
			boolean, isBool = true, true
			rest = rest[4:]
		case strings.HasPrefix(rest, "false"):
			isBool = true
			rest = rest[5:]
		default:
			return c, false
		}
		switch {
		case key == 'k' && isBool:
			c.SnapshotKept = boolean
		case key == 'r' && isBool:
			c.JudgeRetry = boolean
		case isBool:
			return c, false
		case key == 'a':
			c.AttemptID = value
		case key == 'f':
			c.AgentFingerprint = value
		case key == 'v':
			c.VerifyFingerprint = value
		case key == 'j':
			c.JudgeFingerprint = value
		case key == 's':
			c.Status = Status(value)
		case key == 'c':
			c.Class = Class(value)
		default:
			return c, false
		}
		if rest == "" {
			break
		}
		if rest[0] != ',' {
			return c, false
		}
		rest = rest[1:]
		if rest == "" {
			return c, false
		}
	}
	return c, true
}

// plainJSONText reports whether s is printable ASCII without a backslash:
// text encoding/json reads as it is. A control byte (which it refuses) or
// a non-ASCII one (which it may replace) is left to it.
func plainJSONText(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b >= 0x7f || b == '\\' {
			return false
		}
	}
	return true
}
