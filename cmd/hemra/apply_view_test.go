package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/executor"
)

// A warning beside the attempts (a superseded snapshot that could not be
// removed) reaches the operator in plain output, not only in -json.
func TestPlainViewShowsWarnings(t *testing.T) {
	var b strings.Builder
	v := &plainApplyView{w: &b}
	v.Event(executor.Event{Time: time.Now(), Type: executor.EventWarning, Address: "e/h/t#1", Error: "could not remove snapshot sha256:abc"})
	if got := b.String(); !strings.Contains(got, "warning: e/h/t#1: could not remove snapshot sha256:abc") {
		t.Fatalf("plain view printed %q, want the warning with its address and error", got)
	}
}
