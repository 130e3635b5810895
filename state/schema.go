package state

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Every bucket and key name of state.db, and the format version, live in
// this file. A change here is a change of format: bump FormatVersion and add
// a migration.

// Beside state.db, a store holds state.db.backup (backup.go): a byte copy
// of state.db in the same format, taken after bbolt's consistency check by
// a writer that recorded something, never read except to name it in the
// message about a damaged state.db and to compare its meta (lineage,
// serial) with the live one.

// FormatVersion is the state.db format this hemra writes. Open refuses a
// newer one; a writer migrates an older one in one transaction.
const FormatVersion = 2

var (
	// bucketMeta holds keyFormatVersion, keyLineage and keySerial.
	bucketMeta = []byte("meta")
	// bucketAttempts maps an attempt id to its Attempt JSON. Ids sort by
	// creation time, so a cursor walks attempts oldest first.
	bucketAttempts = []byte("attempts")
	// bucketCurrent maps an address to its Current JSON: the compact summary
	// plan reads for every declared attempt.
	bucketCurrent = []byte("current")
	// bucketHistory holds address + "\x00" + attempt id keys with empty
	// values, so History(addr) is one prefix scan in creation order.
	bucketHistory = []byte("history")
	// bucketRuns maps a run id to its Run JSON (without Run.Attempts).
	// Run.PlanSHA256 (added in format 1, absent in older records) names
	// the saved plan file a run applied.
	bucketRuns = []byte("runs")
	// bucketRunAttempts holds run id + "\x00" + attempt id keys, so a run's
	// attempts are one prefix scan and a Run record is never rewritten as
	// its attempts are added.
	bucketRunAttempts = []byte("run_attempts")
	// bucketOpen holds the ids of attempts whose status is not terminal, so
	// RecoverInterrupted never scans every attempt.
	bucketOpen = []byte("open")
	// bucketSummaries maps an attempt id to its Summary JSON (v2): the
	// compact form the results model reads for every attempt of a listing.
	bucketSummaries = []byte("summaries")
	// bucketImported maps the address of an imported attempt
	// (import/<job>/<agent>/<task>#n) to its Current JSON (v2). It is a
	// separate index from bucketCurrent so that plan never sees imported
	// attempts: they are never planned, never re-run, never orphaned.
	bucketImported = []byte("imported")

	keyFormatVersion = []byte("format_version") // big-endian uint64
	keyLineage       = []byte("lineage")        // string
	keySerial        = []byte("serial")         // big-endian uint64
)

// allBuckets are created in every new or migrated store.
var allBuckets = [][]byte{bucketMeta, bucketAttempts, bucketCurrent, bucketHistory, bucketRuns, bucketRunAttempts, bucketOpen, bucketSummaries, bucketImported}

// keySep separates the parts of composite keys. Addresses and ids never
// contain it (AddAttempt refuses them).
const keySep = "\x00"

func historyKey(addr, id string) []byte { return []byte(addr + keySep + id) }
func runAttemptKey(run, id string) []byte {
	return []byte(run + keySep + id)
}

func putUint64(b *bolt.Bucket, key []byte, v uint64) error {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], v)
	return b.Put(key, buf[:])
}

func getUint64(b *bolt.Bucket, key []byte) (uint64, bool, error) {
	v := b.Get(key)
	if v == nil {
		return 0, false, nil
	}
	if len(v) != 8 {
		return 0, true, fmt.Errorf("meta/%s: %d bytes, want 8", key, len(v))
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// migrations upgrade a store from the version of their key to the next one.
// A writer runs every step it needs in the same transaction, so a crash
// mid-migration leaves the old format intact.
var migrations = map[int]func(tx *bolt.Tx) error{
	0: migrateV0,
	1: migrateV1,
}

// migrateV0 upgrades the prototype format (attempts, history and runs only)
// to v1 by building the index buckets v1 added: current (each address's
// newest attempt) and open (attempts not yet terminal).
func migrateV0(tx *bolt.Tx) error {
	for _, name := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	attempts := tx.Bucket(bucketAttempts)
	current := tx.Bucket(bucketCurrent)
	open := tx.Bucket(bucketOpen)
	// Ids sort by creation, so the last attempt seen for an address is its
	// newest.
	return attempts.ForEach(func(k, v []byte) error {
		var a Attempt
		if err := json.Unmarshal(v, &a); err != nil {
			return fmt.Errorf("attempt %s: %w", k, err)
		}
		cur, err := json.Marshal(currentOf(&a))
		if err != nil {
			return err
		}
		if err := current.Put([]byte(a.Address), cur); err != nil {
			return err
		}
		if !a.Status().Terminal() {
			return open.Put(k, nil)
		}
		return nil
	})
}

// migrateV1 upgrades v1 to v2 by adding the summaries of every attempt and
// the (empty) index of imported attempts.
func migrateV1(tx *bolt.Tx) error {
	for _, name := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketAttempts).ForEach(func(k, v []byte) error {
		a, err := decodeAttempt(string(k), v)
		if err != nil {
			return err
		}
		return putSummary(tx, a)
	})
}
