package mcprelay

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hemra-dev/hemra/protocol"
)

// recordedMethods are the client requests whose arguments and results are
// recorded: the ones that act or read on the agent's behalf.
var recordedMethods = map[string]bool{"tools/call": true, "resources/read": true, "prompts/get": true}

// relay connects one server's stdio to its socket.
type relay struct {
	s    *Session
	name string
	proc Process
	host *hostProcess // nil for a server running in the sandbox
	ln   *net.UnixListener

	inMu sync.Mutex
	in   io.WriteCloser

	mu       sync.Mutex
	cur      *client // the client relayed now
	clients  map[*client]bool
	next     int64
	pending  map[int64]*call
	stopping bool
	rep      Report

	stderr     *protocol.Tail
	exited     chan struct{} // Wait returned
	stderrDone chan struct{}
	stdoutDone chan struct{}
}

// client is one connection to the socket.
type client struct {
	conn    *net.UnixConn
	wmu     sync.Mutex
	ids     map[string]int64 // the client's request ids → relay ids, for cancellations
	pending int
	eof     bool // the client is done sending; it is closed once answered
}

// call is a client request waiting for its answer.
type call struct {
	c        *client
	origID   json.RawMessage
	method   string
	name     string
	id       string // the recorded id, "<server>/<n>"
	start    time.Time
	recorded bool
}

func newRelay(s *Session, name string, p Process, ln *net.UnixListener) *relay {
	return &relay{
		s: s, name: name, proc: p, ln: ln, in: p.Stdin(),
		clients: map[*client]bool{}, pending: map[int64]*call{},
		rep:    Report{Name: name},
		stderr: protocol.NewTail(s.opts.StderrTailBytes),
		exited: make(chan struct{}), stderrDone: make(chan struct{}), stdoutDone: make(chan struct{}),
	}
}

func (r *relay) run() {
	go r.drainStderr()
	go r.wait()
	go r.readServer()
	go r.accept()
}

func (r *relay) drainStderr() {
	defer close(r.stderrDone)
	if e := r.proc.Stderr(); e != nil {
		_, _ = io.Copy(r.stderr, e)
	}
}

func (r *relay) wait() {
	code, err := r.proc.Wait()
	r.mu.Lock()
	r.rep.Exit = &code
	stopping := r.stopping
	r.mu.Unlock()
	close(r.exited)
	if stopping {
		return
	}
	msg := fmt.Sprintf("exited with code %d before the agent finished", code)
	if err != nil {
		msg = fmt.Sprintf("ended before the agent finished: %v", err)
	}
	r.failWithTail(msg)
}

// failWithTail fails the session once the server's stderr has been read
// to its end (or a second has passed), so the message carries its tail.
func (r *relay) failWithTail(msg string) {
	select {
	case <-r.stderrDone:
	case <-time.After(time.Second):
	}
	r.mu.Lock()
	if r.rep.Error == "" {
		r.rep.Error = msg
	}
	r.mu.Unlock()
	r.s.fail(&ServerError{Server: r.name, Msg: msg, StderrTail: r.stderr.String()})
}

func (r *relay) stoppingNow() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopping
}

// readServer relays the server's stdout to the client it answers.
func (r *relay) readServer() {
	defer close(r.stdoutDone)
	lr := protocol.NewLineReader(r.proc.Stdout(), r.s.opts.MaxLineBytes)
	for {
		line, err := lr.Next()
		if err != nil {
			if protocol.IsLineTooLong(err) {
				if !r.stoppingNow() {
					go r.failWithTail(fmt.Sprintf("sent a message over the %s limit of one MCP message", protocol.FormatBytes(int64(r.s.opts.MaxLineBytes))))
				}
				lr.Discard()
				return
			}
			if r.stoppingNow() {
				return
			}
			select {
			case <-r.exited: // wait() says how it ended
			case <-time.After(2 * time.Second):
				r.failWithTail("closed its stdout while still running")
			}
			return
		}
		r.fromServer(line)
	}
}

func (r *relay) fromServer(line []byte) {
	m := parse(line)
	r.mu.Lock()
	r.rep.Messages++
	r.rep.BytesOut += int64(len(line))
	r.mu.Unlock()
	switch {
	case m.isResponse():
		if n, err := strconv.ParseInt(string(m.id), 10, 64); err == nil {
			r.mu.Lock()
			c := r.pending[n]
			delete(r.pending, n)
			if c != nil {
				c.c.pending--
				delete(c.c.ids, string(c.origID))
			}
			r.mu.Unlock()
			if c != nil {
				if c.recorded {
					r.recordResult(c, &m, len(line))
				}
				r.toClient(c.c, splice(line, m.idStart, m.idEnd, c.origID))
				r.closeIfDone(c.c)
				return
			}
		}
		r.toCurrent(line)
	case m.isRequest():
		// The server asks the client (sampling, roots, elicitation).
		if !r.toCurrent(line) {
			r.toServer(rpcError(m.id, codeRelay, "hemra: no MCP client is connected to answer this request"))
		}
	default:
		r.toCurrent(line)
	}
}

func (r *relay) accept() {
	for {
		conn, err := r.ln.AcceptUnix()
		if err != nil {
			return // closed by stop
		}
		if !r.admit(conn) {
			go r.admitLater(conn)
		}
	}
}

// admit makes conn the relayed client unless another one is.
func (r *relay) admit(conn *net.UnixConn) bool {
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		conn.Close()
		return true
	}
	if r.cur != nil {
		r.mu.Unlock()
		return false
	}
	c := &client{conn: conn, ids: map[string]int64{}}
	r.cur = c
	r.clients[c] = true
	r.rep.Connections++
	r.mu.Unlock()
	r.s.record(Record{Server: r.name, Kind: "connect"}, true)
	go r.readClient(c)
	return true
}

// admitLater gives a client that reconnects right after hanging up a
// moment for the relay to see the first one go, then refuses it.
func (r *relay) admitLater(conn *net.UnixConn) {
	for i := 0; i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
		if r.admit(conn) {
			return
		}
	}
	r.refuse(conn)
}

// refuse answers a second concurrent client's first request with an
// error, then hangs up.
func (r *relay) refuse(conn *net.UnixConn) {
	defer conn.Close()
	if r.stoppingNow() {
		return
	}
	r.s.record(Record{Server: r.name, Kind: "refused", Note: "a second client while one is connected: MCP's stdio transport has one client per server"}, true)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := protocol.NewLineReader(conn, r.s.opts.MaxLineBytes).Next()
	if err != nil {
		return
	}
	if m := parse(line); m.isRequest() {
		_, _ = conn.Write(append(rpcError(m.id, codeRelay, fmt.Sprintf("hemra: MCP server %q already has a client connected; connect one client at a time", r.name)), '\n'))
	}
}

// readClient relays one client's messages to the server.
func (r *relay) readClient(c *client) {
	lr := protocol.NewLineReader(c.conn, r.s.opts.MaxLineBytes)
	for {
		line, err := lr.Next()
		if err != nil {
			if protocol.IsLineTooLong(err) {
				r.s.record(Record{Server: r.name, Kind: "refused", Note: fmt.Sprintf("the client sent a message over the %s limit of one MCP message: its connection was closed", protocol.FormatBytes(int64(r.s.opts.MaxLineBytes)))}, true)
				r.mu.Lock()
				c.pending = 0
				r.mu.Unlock()
			}
			r.clientDone(c)
			return
		}
		r.fromClient(c, line)
	}
}

func (r *relay) fromClient(c *client, line []byte) {
	m := parse(line)
	r.mu.Lock()
	r.rep.Messages++
	r.rep.BytesIn += int64(len(line))
	r.mu.Unlock()
	switch {
	case m.isRequest():
		r.mu.Lock()
		r.next++
		n := r.next
		r.mu.Unlock()
		cl := &call{c: c, origID: m.id, method: m.method, id: fmt.Sprintf("%s/%d", r.name, n), start: time.Now(), recorded: recordedMethods[m.method]}
		if cl.recorded {
			name, input := callDetails(m.method, m.params)
			cl.name = name
			if !r.s.record(Record{Server: r.name, Kind: "tool_call", Method: m.method, ID: cl.id, Name: name, Input: input, Bytes: len(line)}, false) {
				r.mu.Lock()
				r.rep.Refused++
				r.mu.Unlock()
				r.s.noteLimit(r.name)
				r.toClient(c, rpcError(m.id, codeRelay, fmt.Sprintf("hemra: this attempt's recorded MCP calls reached the %s limit; no more calls are relayed", protocol.FormatBytes(r.s.opts.MaxEventBytes))))
				return
			}
			r.mu.Lock()
			r.rep.Calls++
			r.mu.Unlock()
		}
		r.mu.Lock()
		r.pending[n] = cl
		c.pending++
		c.ids[string(m.id)] = n
		r.mu.Unlock()
		r.toServer(splice(line, m.idStart, m.idEnd, []byte(strconv.FormatInt(n, 10))))
	case m.object && m.method == "notifications/cancelled" && m.params != nil:
		// The cancelled request is named by the client's id: the server
		// knows it by the relay's.
		var p map[string]json.RawMessage
		if json.Unmarshal(m.params, &p) == nil && p["requestId"] != nil {
			r.mu.Lock()
			n, ok := c.ids[string(p["requestId"])]
			r.mu.Unlock()
			if ok {
				p["requestId"] = json.RawMessage(strconv.FormatInt(n, 10))
				if b, err := json.Marshal(p); err == nil {
					line = splice(line, m.parStart, m.parEnd, b)
				}
			}
		}
		r.toServer(line)
	default:
		r.toServer(line)
	}
}

// clientDone: the client sent its last message. It stays connected until
// its pending requests are answered, but another client may connect.
func (r *relay) clientDone(c *client) {
	r.mu.Lock()
	c.eof = true
	if r.cur == c {
		r.cur = nil
	}
	r.mu.Unlock()
	r.closeIfDone(c)
}

func (r *relay) closeIfDone(c *client) {
	r.mu.Lock()
	done := c.eof && c.pending == 0 && r.clients[c]
	if done {
		delete(r.clients, c)
	}
	r.mu.Unlock()
	if done {
		c.conn.Close()
		r.s.record(Record{Server: r.name, Kind: "disconnect"}, true)
	}
}

func (r *relay) toServer(line []byte) {
	buf := make([]byte, 0, len(line)+1)
	buf = append(append(buf, line...), '\n')
	r.inMu.Lock()
	defer r.inMu.Unlock()
	_, _ = r.in.Write(buf) // a server that is gone is reported by wait()
}

// toCurrent sends to the client relayed now; false when there is none.
func (r *relay) toCurrent(line []byte) bool {
	r.mu.Lock()
	c := r.cur
	r.mu.Unlock()
	if c == nil {
		return false
	}
	r.toClient(c, line)
	return true
}

func (r *relay) toClient(c *client, line []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	buf := make([]byte, 0, len(line)+1)
	buf = append(append(buf, line...), '\n')
	_, _ = c.conn.Write(buf) // a client that left just misses it
}

func (r *relay) recordResult(c *call, m *message, size int) {
	rec := Record{Server: r.name, Kind: "tool_result", Method: c.method, ID: c.id, Name: c.name, Output: m.result, Error: m.errorJSON, DurationNS: time.Since(c.start).Nanoseconds(), Bytes: size}
	if m.errorJSON != nil {
		rec.IsError = true
	} else if c.method == "tools/call" {
		var res struct {
			IsError bool `json:"isError"`
		}
		_ = json.Unmarshal(m.result, &res)
		rec.IsError = res.IsError
	}
	if rec.IsError {
		r.mu.Lock()
		r.rep.Errors++
		r.mu.Unlock()
	}
	if !r.s.record(rec, false) {
		rec.Output, rec.Note = nil, fmt.Sprintf("output not recorded: the %s limit of recorded MCP calls was reached", protocol.FormatBytes(r.s.opts.MaxEventBytes))
		r.s.record(rec, true)
	}
}

// callDetails is what a recorded request acts on: the tool or prompt name
// with its arguments, or the resource URI.
func callDetails(method string, params json.RawMessage) (string, json.RawMessage) {
	var p struct {
		Name      string          `json:"name"`
		URI       string          `json:"uri"`
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(params, &p)
	switch method {
	case "resources/read":
		return p.URI, params
	default:
		return p.Name, p.Arguments
	}
}

// stop ends the relay: no new clients, the server's stdin closed, then
// SIGTERM and SIGKILL to its group, and the clients disconnected.
func (r *relay) stop() Report {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	r.ln.Close()

	grace := r.s.opts.StopGrace
	stopped := ""
	select {
	case <-r.exited:
	default:
		r.inMu.Lock()
		_ = r.in.Close()
		r.inMu.Unlock()
		select {
		case <-r.exited:
			stopped = "stdin"
		case <-time.After(stdinGrace):
			stopped = "terminate"
			_ = r.proc.Terminate()
			select {
			case <-r.exited:
			case <-time.After(grace):
				stopped = "kill"
				_ = r.proc.Kill()
				select {
				case <-r.exited:
				case <-time.After(grace):
					// A sandbox command that does not report its end: the
					// sandbox's own stop removes it.
				}
			}
		}
	}
	if r.host != nil {
		// Nothing is left in its group (Wait killed it): close the pipes
		// so the readers end even if a straggler escaped the group.
		select {
		case <-r.stdoutDone:
		case <-time.After(time.Second):
		}
		r.host.closeReaders()
	}
	select {
	case <-r.stdoutDone:
	case <-time.After(grace):
	}
	select {
	case <-r.stderrDone:
	case <-time.After(time.Second):
	}

	r.mu.Lock()
	for c := range r.clients {
		c.conn.Close()
	}
	r.clients = map[*client]bool{}
	r.cur = nil
	r.rep.Stopped = stopped
	r.rep.StderrTail = r.stderr.String()
	rep := r.rep
	r.mu.Unlock()
	r.s.record(Record{Server: r.name, Kind: "exit", Exit: rep.Exit, Note: stopNote(stopped, rep)}, true)
	return rep
}

func stopNote(stopped string, rep Report) string {
	switch stopped {
	case "stdin":
		return "stopped: exited when its stdin was closed"
	case "terminate":
		return "stopped: SIGTERM to its process group"
	case "kill":
		return "stopped: SIGKILL to its process group"
	}
	if rep.Error != "" {
		return rep.Error
	}
	return "ended before the stop"
}
