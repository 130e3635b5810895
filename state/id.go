package state

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"sync"
	"time"
)

// idEncoding is base32 over an alphabet in ASCII order, so ids of equal
// length sort as the bytes they encode do: by time, then counter.
var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

var idClock struct {
	sync.Mutex
	lastMS  uint64
	counter uint16
}

// NewID returns a new attempt or run id: 20 characters encoding the time in
// milliseconds, a counter that orders ids made in the same millisecond by
// this process, and random bits that keep ids from different processes
// apart. Ids sort by creation time.
func NewID() string {
	idClock.Lock()
	ms := uint64(time.Now().UnixMilli())
	if ms <= idClock.lastMS {
		// Same millisecond, or the clock stepped back: keep ids increasing.
		ms = idClock.lastMS
		idClock.counter++
		if idClock.counter == 0 {
			ms++
		}
	} else {
		idClock.counter = 0
	}
	idClock.lastMS = ms
	counter := idClock.counter
	idClock.Unlock()

	var b [12]byte
	binary.BigEndian.PutUint64(b[0:8], ms<<16)
	binary.BigEndian.PutUint16(b[6:8], counter)
	_, _ = rand.Read(b[8:])
	return idEncoding.EncodeToString(b[:])
}

// IDTime is the creation time encoded in an id made by NewID, and false for
// any other string.
func IDTime(id string) (time.Time, bool) {
	b, err := idEncoding.DecodeString(id)
	if err != nil || len(b) != 12 {
		return time.Time{}, false
	}
	ms := binary.BigEndian.Uint64(b[0:8]) >> 16
	return time.UnixMilli(int64(ms)), true
}

// IDAt returns the id of a record made elsewhere at time t, the same for
// the same t and seed: what `hemra import` gives a Harbor trial (seed: the
// trial's id), so that importing it again finds it, and its id sorts by
// when the trial ran, as every id does.
func IDAt(t time.Time, seed string) string {
	sum := sha256.Sum256([]byte(seed))
	var b [12]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(t.UnixMilli())<<16)
	copy(b[6:12], sum[:6])
	return idEncoding.EncodeToString(b[:])
}
