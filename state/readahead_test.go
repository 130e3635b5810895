package state_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/hemra-dev/hemra/state"
	"github.com/hemra-dev/hemra/state/statetest"
)

// TestReadAhead: a walk read ahead yields what the walk yields, in its
// order; an error from fn stops it (the walk's goroutine does not hang)
// and is returned, as is one from the walk.
func TestReadAhead(t *testing.T) {
	dir := t.TempDir()
	w, err := state.Open(dir, state.Options{Writer: true})
	if err != nil {
		t.Fatal(err)
	}
	var as []*state.Attempt
	for i := range 1000 {
		as = append(as, statetest.Attempt(fmt.Sprintf("e/h/t%04d#1", i), "fp"))
	}
	if err := w.AddAttempts(as); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err := state.Open(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	walk := func(v *state.View) func(fn func(string) error) error {
		return func(fn func(string) error) error {
			return v.ForEachCurrent(func(addr string, _ state.Current) error { return fn(addr) })
		}
	}
	err = r.View(func(v *state.View) error {
		var want, got []string
		if err := walk(v)(func(a string) error { want = append(want, a); return nil }); err != nil {
			return err
		}
		if err := state.ReadAhead(v, walk(v), func(a string) error { got = append(got, a); return nil }); err != nil {
			return err
		}
		if len(want) != 1000 || !reflect.DeepEqual(got, want) {
			t.Errorf("read ahead: %d addresses, want the walk's %d in its order", len(got), len(want))
		}
		stop := errors.New("enough")
		n := 0
		if err := state.ReadAhead(v, walk(v), func(string) error {
			if n++; n == 300 {
				return stop
			}
			return nil
		}); !errors.Is(err, stop) || n != 300 {
			t.Errorf("fn's error: %v after %d, want %v after 300", err, n, stop)
		}
		broken := errors.New("walk failed")
		if err := state.ReadAhead(v, func(fn func(int) error) error {
			for i := range 600 {
				if err := fn(i); err != nil {
					return err
				}
			}
			return broken
		}, func(int) error { return nil }); !errors.Is(err, broken) {
			t.Errorf("walk's error: %v, want %v", err, broken)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
