package docker

// Labels hemra puts on every container, image and volume it creates, so
// that `hemra doctor -prune` finds what a killed hemra left behind and
// touches nothing else. Values never hold a secret: only ids and addresses.
const (
	LabelManaged = "dev.hemra.managed" // "true"
	LabelAttempt = "dev.hemra.attempt" // attempt id
	LabelAddress = "dev.hemra.address" // eval/harness/task#n
	LabelRole    = "dev.hemra.role"    // agent | verifier | judge | snapshot | task-image
	LabelContext = "dev.hemra.context" // task images: hash of the build context
	LabelPID     = "dev.hemra.pid"     // pid of the hemra that created a container
	LabelHost    = "dev.hemra.host"    // host name of that hemra
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
