package executor

import (
	"fmt"
	"sync"
	"time"

	"github.com/hemra-dev/hemra/state"
)

// maxPendingRecords bounds the attempts whose records are still being
// written: past it, workers wait before starting another attempt.
const maxPendingRecords = 256

// recorder writes one attempt's records in order (the attempt, its
// transitions, its outcome) off the worker's path. Each state write is
// durable when it returns, but nothing a worker does next depends on it:
// a crash before a write lands leaves the attempt open or unrecorded, and
// the next writer records it as interrupted or the next plan runs it
// again. A write waits at most recordLinger for the attempt's next ones
// (its outcome is never held back), and they go to the store together,
// as one transaction: an attempt that ends within recordLinger (a nop
// attempt) is one commit, not one per stage. Writes of different
// attempts reach the store together, so the store's writer commits them
// in shared transactions: one fsync for many writes rather than one per
// write. So that attempts that run one after another (-parallelism 1)
// share them too, the store holds each batch up to batchWait for the
// writes that follow (state.Store.SetBatchWait) while the attempts run,
// but for the writes of an attempt still running once recordLinger is out
// (state.Store.WriteNow). A plan made while the apply runs sees the
// attempts it is running recordLinger late at most, and the ones that
// ended recordLinger + batchWait late at most, each plus the time its
// commit takes (its fsyncs: seconds on a disk busy with other writes).

// recordLinger is how long an attempt's write waits for the ones that
// follow it before it is committed on its own.
const recordLinger = 50 * time.Millisecond

// batchWait is how long a batch of the store's writes waits for more while
// attempts run: a nop attempt on the local sandbox takes a few ms, so
// about forty of them share a commit at -parallelism 1.
const batchWait = 200 * time.Millisecond

type recorder struct {
	ops   chan recordOp
	err   error // the first write that failed; later writes are skipped
	after func(err error)
}

// recordOp is one queued write and how its error reads.
type recordOp struct {
	w     state.Write
	what  string // "recording the outcome"
	final bool   // the outcome: nothing follows
}

func (e *executor) newRecorder() *recorder {
	e.recSem <- struct{}{}
	e.recWG.Add(1)
	r := &recorder{ops: make(chan recordOp, 8)}
	go func() {
		defer e.recWG.Done()
		for op := range r.ops {
			ops := []recordOp{op}
			var linger *time.Timer
		more:
			for !ops[len(ops)-1].final {
				if linger == nil {
					linger = time.NewTimer(recordLinger)
				}
				select {
				case next, ok := <-r.ops:
					if !ok {
						break more
					}
					ops = append(ops, next)
				case <-linger.C:
					break more
				}
			}
			if linger != nil {
				linger.Stop()
			}
			if r.err == nil {
				// Writes of an attempt that goes on running (its linger
				// ran out before its outcome) are news a plan made
				// meanwhile wants: they skip the store's batch wait.
				r.err = r.write(e.store, ops, !ops[len(ops)-1].final)
			}
		}
		<-e.recSem
		if r.after != nil {
			r.after(r.err)
		}
	}()
	return r
}

// write makes ops in one transaction; should that fail, one by one, so
// that the writes before the failing one land and its error is its own.
func (r *recorder) write(st *state.Store, ops []recordOp, now bool) error {
	write := st.Write
	if now {
		write = st.WriteNow
	}
	if len(ops) > 1 {
		ws := make([]state.Write, len(ops))
		for i, op := range ops {
			ws[i] = op.w
		}
		if write(ws...) == nil {
			return nil
		}
	}
	for _, op := range ops {
		if err := write(op.w); err != nil {
			return fmt.Errorf("%s: %w", op.what, err)
		}
	}
	return nil
}

// do queues a write; what says what it records, for its error.
func (r *recorder) do(what string, w state.Write) { r.ops <- recordOp{w: w, what: what} }

// finish queues the attempt's last write (its outcome).
func (r *recorder) finish(what string, w state.Write) {
	r.ops <- recordOp{w: w, what: what, final: true}
}

// close queues nothing more; then, once every write is done, calls
// after with the first error (on the recorder's goroutine).
func (r *recorder) close(after func(err error)) {
	r.after = after
	close(r.ops)
}

// recorders is the executor's bookkeeping of pending recorders.
type recorders struct {
	recSem chan struct{}
	recWG  sync.WaitGroup
}
