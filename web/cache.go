package web

import (
	"sync"

	"github.com/hemra-dev/hemra/results"
)

// resultsCache keeps the last few results read, each with the store's
// lineage and serial when it was read: while nothing writes, the next page
// over the same selection costs one look at the serial instead of reading
// every summary again. Any write (an attempt's transition, a new run)
// changes the serial, so a page never shows results older than the store.
// Results are never changed once built, so pages share them.
type resultsCache struct {
	mu      sync.Mutex
	entries []cacheEntry // most recent first
}

type cacheEntry struct {
	q     results.Query
	stamp results.StoreInfo
	r     *results.Results
}

// cacheSize bounds what the cache holds: the latest results and a run's
// or two (each a few tens of MB for 100,000 attempts).
const cacheSize = 3

func (c *resultsCache) get(q results.Query, stamp results.StoreInfo) *results.Results {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.entries {
		if e.q == q && e.stamp == stamp {
			copy(c.entries[1:i+1], c.entries[:i])
			c.entries[0] = e
			return e.r
		}
	}
	return nil
}

func (c *resultsCache) put(q results.Query, stamp results.StoreInfo, r *results.Results) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := []cacheEntry{{q, stamp, r}}
	for _, e := range c.entries {
		// An entry of an older serial is stale for good.
		if e.q != q && e.stamp == stamp && len(kept) < cacheSize {
			kept = append(kept, e)
		}
	}
	c.entries = kept
}

// load is results.Load through the cache. Results read in the same
// transaction as a serial that has moved on since are read again.
func (s *Server) load(q results.Query) (*results.Results, error) {
	stamp, err := results.Stamp(s.opts.Store)
	if err != nil {
		return nil, err
	}
	if s.opts.NoCache {
		return results.Load(s.opts.Store, q)
	}
	if r := s.cache.get(q, stamp); r != nil {
		return r, nil
	}
	r, err := results.Load(s.opts.Store, q)
	if err != nil {
		return nil, err
	}
	if r.Store.Lineage == stamp.Lineage && r.Store.Serial == stamp.Serial {
		s.cache.put(q, stamp, r)
	}
	return r, nil
}
