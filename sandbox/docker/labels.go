package docker

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// Labels hemra puts on every container, image and volume it creates, so
// that `hemra doctor -prune` finds what a killed hemra left behind and
// touches nothing else. Values never hold a secret: only ids and addresses.
const (
	LabelManaged = "dev.hemra.managed" // "true"
	LabelAttempt = "dev.hemra.attempt" // attempt id
	LabelAddress = "dev.hemra.address" // eval/harness/task#n
	LabelRole    = "dev.hemra.role"    // agent | verifier | judge | snapshot | task-image
	LabelContext = "dev.hemra.context" // task images: hash of the build context
	LabelService = "dev.hemra.service" // a compose environment's service containers: the service's name
	LabelPID     = "dev.hemra.pid"     // pid of the hemra that created a container
	LabelHost    = "dev.hemra.host"    // host name of that hemra
	LabelHostID  = "dev.hemra.host-id" // HostID of the machine that hemra ran on (containers and snapshots)
	LabelStore   = "dev.hemra.store"   // absolute folder of the attempt's state store
	LabelLineage = "dev.hemra.lineage" // that store's lineage
)

// Roles of labelled objects beyond the instance roles of sandbox.Spec.
const (
	RoleSnapshot  = "snapshot"
	RoleTaskImage = "task-image"
)

// TaskImageRepo is the repository task images are tagged in:
// hemra-task:<first 12 hex of the context hash>.
const TaskImageRepo = "hemra-task"

// HostID identifies the machine hemra runs on, for the objects it labels on
// an engine other machines may share: a hash of the machine id
// (/etc/machine-id) and the host name, never the machine id itself (which
// systemd asks to keep confidential). Two CI containers built from one
// image share a machine id but not a host name; a machine whose host name
// changes sees its older objects as another host's, and keeps them.
// `hemra doctor -prune` removes only objects with this host's id.
// SetHostID replaces it (the command sets it from HEMRA_HOST_ID).
func HostID() string {
	if id, _ := hostIDSet.Load().(string); id != "" {
		return id
	}
	return machineHostID()
}

// hostIDSet holds the identity SetHostID gave, if any.
var hostIDSet atomic.Value

// SetHostID makes id this hemra's host identity instead of the one derived
// from the machine: several operators or CI jobs that share one machine
// and one engine each set their own (HEMRA_HOST_ID), so that each prune
// touches only what its own hemra made. Call it before anything is
// labelled; "" keeps the machine's.
func SetHostID(id string) { hostIDSet.Store(strings.TrimSpace(id)) }

var machineHostID = sync.OnceValue(func() string {
	var machine []byte
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if b, err := os.ReadFile(p); err == nil && len(bytes.TrimSpace(b)) > 0 {
			machine = bytes.TrimSpace(b)
			break
		}
	}
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte("hemra host id\x00" + string(machine) + "\x00" + host))
	return hex.EncodeToString(sum[:8])
})

// withStore adds a spec's store and lineage to l, when known.
func withStore(l map[string]string, store, lineage string) map[string]string {
	if store != "" {
		l[LabelStore] = store
	}
	if lineage != "" {
		l[LabelLineage] = lineage
	}
	return l
}

func labels(attemptID, address, role string) map[string]string {
	l := map[string]string{LabelManaged: "true", LabelRole: role}
	if attemptID != "" {
		l[LabelAttempt] = attemptID
	}
	if address != "" {
		l[LabelAddress] = address
	}
	return l
}
