package executor

import (
	"sync"
)

// maxPendingRecords bounds the attempts whose records are still being
// written: past it, workers wait before starting another attempt.
const maxPendingRecords = 256

// recorder writes one attempt's records in order (the attempt, its
// transitions, its outcome) off the worker's path. Each state write is
// durable when it returns, but nothing a worker does next depends on it:
// a crash before a write lands leaves the attempt open or unrecorded, and
// the next writer records it as interrupted or the next plan runs it
// again. Writes of different attempts reach the store together, so the
// store's writer commits them in shared transactions: one fsync for many
// attempts rather than four per attempt.
type recorder struct {
	ops   chan func() error
	err   error // the first write that failed; later writes are skipped
	after func(err error)
}

func (e *executor) newRecorder() *recorder {
	e.recSem <- struct{}{}
	e.recWG.Add(1)
	r := &recorder{ops: make(chan func() error, 8)}
	go func() {
		defer e.recWG.Done()
		for op := range r.ops {
			if r.err == nil {
				r.err = op()
			}
		}
		<-e.recSem
		if r.after != nil {
			r.after(r.err)
		}
	}()
	return r
}

// do queues a write.
func (r *recorder) do(op func() error) { r.ops <- op }

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
