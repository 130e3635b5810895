package state

import "encoding/json"

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
	}
	return c
}

func encodeCurrent(c Current) ([]byte, error) { return json.Marshal(c) }

// decodeCurrent decodes a Current value.
func decodeCurrent(val []byte) (Current, error) {
	var c Current
	err := json.Unmarshal(val, &c)
	return c, err
}
