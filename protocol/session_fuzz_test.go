package protocol_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/protocol"
	"github.com/hemra-dev/hemra/state"
)

// scriptedProcess is a harness whose stdout is a fixed script: it "exits"
// once its stdout has been read to the end, or when it is killed.
type scriptedProcess struct {
	out    *eofSignal
	stdin  io.WriteCloser
	killed chan struct{}
	once   sync.Once
}

type eofSignal struct {
	r    io.Reader
	done chan struct{}
	once sync.Once
}

func (e *eofSignal) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(func() { close(e.done) })
	}
	return n, err
}

type discardCloser struct{}

func (discardCloser) Write(p []byte) (int, error) { return len(p), nil }
func (discardCloser) Close() error                { return nil }

func newScripted(stdout []byte) *scriptedProcess {
	return &scriptedProcess{out: &eofSignal{r: bytes.NewReader(stdout), done: make(chan struct{})}, stdin: discardCloser{}, killed: make(chan struct{})}
}

func (p *scriptedProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *scriptedProcess) Stdout() io.Reader     { return p.out }
func (p *scriptedProcess) Stderr() io.Reader     { return strings.NewReader("") }
func (p *scriptedProcess) Terminate() error      { return p.Kill() }
func (p *scriptedProcess) Kill() error {
	p.once.Do(func() { close(p.killed) })
	return nil
}
func (p *scriptedProcess) Wait() (int, error) {
	select {
	case <-p.out.done:
	case <-p.killed:
	}
	return 0, nil
}

// FuzzProtocolMessages: whatever a harness prints on stdout (lines of
// JSON, half-lines, binary, huge numbers, wrong types, messages out of
// order), the session ends with an outcome that is a success only when a
// hello and an ok result came, a classified failure otherwise, never a
// panic; and every line hemra writes to the event log is valid JSON.
// Seeds: a good exchange, and the misbehaviours the session tests cover.
func FuzzProtocolMessages(f *testing.F) {
	hello := `{"type":"hello","protocol":"hemra.protocol/1","harness":{"name":"h","version":"1"}}`
	result := `{"type":"result","status":"ok","output":"done"}`
	for _, s := range []string{
		hello + "\n" + `{"type":"event","kind":"message","data":{"role":"assistant","content":"hi"}}` + "\n" + result + "\n",
		hello + "\n" + result + "\n" + result + "\n",
		hello + "\n" + `{"type":"event","kind":"nope"}` + "\n",
		hello + "\n" + `{"type":"result","status":"maybe"}` + "\n",
		`{"type":"result","status":"ok"}` + "\n",
		`{"type":"hello","protocol":"other/9"}` + "\n",
		hello + "\n" + `[1,2,3]` + "\n",
		hello + "\n" + `{"type":"event","kind":"usage","data":{"input_tokens":1e999}}` + "\n" + result,
		"not json\n",
		hello,
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stdout []byte) {
		var log bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out := protocol.Run(ctx, newScripted(stdout), &protocol.StartMessage{}, protocol.Options{
			HandshakeTimeout: time.Second, Deadline: 2 * time.Second, CancelGrace: 10 * time.Millisecond,
			MaxLineBytes: 4096, MaxEventBytes: 1 << 16, EventLog: &log,
		})
		if out.OK() {
			if out.Hello == nil || out.Result == nil {
				t.Fatalf("a success without a hello and a result: %+v", out)
			}
		} else if out.Class == "" && out.Error == "" {
			t.Fatalf("a failure with no class and no reason: %+v", out)
		}
		if out.Class == state.ClassInfraError {
			t.Fatalf("a harness's output is never hemra's infrastructure error: %s", out.Error)
		}
		sc := bufio.NewScanner(&log)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if !json.Valid(sc.Bytes()) {
				t.Fatalf("event log line is not JSON: %q", sc.Bytes())
			}
		}
	})
}
