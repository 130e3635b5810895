package state

import (
	"fmt"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// SetFormatVersionForTesting rewrites the format version of the state.db in
// dir, so that tests (statetest) can check how Open treats a store written
// by another hemra. Nothing else calls it.
func SetFormatVersionForTesting(dir string, version int) error {
	db, err := bolt.Open(filepath.Join(dir, dbFile), 0o600, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("%s has no meta bucket", dir)
		}
		return putUint64(meta, keyFormatVersion, uint64(version))
	})
}
