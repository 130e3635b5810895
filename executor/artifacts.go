package executor

import (
	"errors"
	"fmt"

	"github.com/hemra-dev/hemra/protocol"
	"github.com/hemra-dev/hemra/state"
)

// storeArtifacts reads the artifacts copied out of a stopped instance and
// stores each as a blob. Only regular files count; anything else is left
// out and noted on the attempt. A quota overrun is the harness's error.
func (a *attemptRun) storeArtifacts(dir string) error {
	set, err := protocol.CollectArtifacts(dir, a.e.opts.Artifacts)
	if err != nil {
		var ae *protocol.ArtifactError
		if errors.As(err, &ae) {
			return &stageError{state.ClassProtocolError, err.Error()}
		}
		return infraErr("reading the artifacts: %v", err)
	}
	for _, s := range set.Skipped {
		a.out.Error = joinMsg(a.out.Error, fmt.Sprintf("artifact %s left out: %s", s.Path, s.Reason))
		a.log.note("artifact", "agent", "left out "+s.Path+": "+s.Reason)
	}
	if err := protocol.StoreArtifacts(dir, set.Files, a.e.store.PutBlobFile); err != nil {
		var ae *protocol.ArtifactError
		if errors.As(err, &ae) {
			return &stageError{state.ClassProtocolError, err.Error()}
		}
		return infraErr("%v", err)
	}
	a.out.Artifacts = set.Files
	return nil
}
