//go:build !linux

package state

import bolt "go.etcd.io/bbolt"

func dropPages(*bolt.Tx) {}
