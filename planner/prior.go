package planner

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/hemra-dev/hemra/state"
)

// Prior is what planning reads of the state: *state.Store satisfies it.
// Compute reads every Current once (expecting them in address order, as
// the store yields them; any order works, more slowly), and a full
// Attempt (with its manifest) only for attempts whose fingerprints
// changed, to explain the change. Attempt and Blob may be called from
// several goroutines at once.
type Prior interface {
	Meta() (state.Meta, error)
	ForEachCurrent(fn func(addr string, c state.Current) error) error
	Attempt(id string) (*state.Attempt, error)
	Blob(sha string) ([]byte, error)
}

// MemoryPrior is a Prior held in memory: the empty state of a store that
// does not exist yet, and the fixture form of golden tests
// (planner/testdata/<case>/prior.json).
type MemoryPrior struct {
	Lineage  string                    `json:"lineage"`
	Serial   uint64                    `json:"serial"`
	Currents map[string]state.Current  `json:"currents"`
	Attempts map[string]*state.Attempt `json:"attempts"`
	// Blobs maps a SHA-256 (hex) to its content, for text diffs.
	Blobs map[string]string `json:"blobs,omitempty"`
}

// EmptyPrior is the prior state of a store that does not exist yet.
func EmptyPrior() *MemoryPrior { return &MemoryPrior{} }

// LoadMemoryPrior reads a prior.json fixture.
func LoadMemoryPrior(path string) (*MemoryPrior, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p MemoryPrior
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &p, nil
}

// Meta implements Prior.
func (p *MemoryPrior) Meta() (state.Meta, error) {
	return state.Meta{FormatVersion: state.FormatVersion, Lineage: p.Lineage, Serial: p.Serial}, nil
}

// ForEachCurrent implements Prior, in address order like the store.
func (p *MemoryPrior) ForEachCurrent(fn func(addr string, c state.Current) error) error {
	addrs := make([]string, 0, len(p.Currents))
	for a := range p.Currents {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		if err := fn(a, p.Currents[a]); err != nil {
			return err
		}
	}
	return nil
}

// Attempt implements Prior.
func (p *MemoryPrior) Attempt(id string) (*state.Attempt, error) {
	a, ok := p.Attempts[id]
	if !ok {
		return nil, fmt.Errorf("attempt %s not found", id)
	}
	return a, nil
}

// Blob implements Prior.
func (p *MemoryPrior) Blob(sha string) ([]byte, error) {
	b, ok := p.Blobs[sha]
	if !ok {
		return nil, fmt.Errorf("blob %s not found", sha)
	}
	return []byte(b), nil
}
