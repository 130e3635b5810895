package state

import (
	"encoding/json"
	"fmt"
)

// AttemptOutcome is the outcome of the attempt with this id (nil while it
// has not ended), read without its manifest or groups: what the executor
// asks of the attempts its own supersede, one per attempt it records.
func (v *View) AttemptOutcome(id string) (*Outcome, error) {
	val := v.get(bucketAttempts, id)
	if val == nil {
		return nil, fmt.Errorf("attempt %q: %w", id, ErrNotFound)
	}
	val, err := unpackValue(val)
	if err != nil {
		return nil, fmt.Errorf("attempt %q: %w", id, err)
	}
	var rec struct {
		Outcome *Outcome `json:"outcome"`
	}
	if err := json.Unmarshal(val, &rec); err != nil {
		return nil, fmt.Errorf("attempt %q: %w", id, err)
	}
	return rec.Outcome, nil
}
