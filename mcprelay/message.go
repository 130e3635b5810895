package mcprelay

import (
	"bytes"
	"encoding/json"
	"io"
)

// message is what the relay needs to know of one JSON-RPC line: its
// method, its id (with the byte range of the id's value in the line, so
// that it can be replaced without re-encoding the rest), and the raw
// params, result and error members.
type message struct {
	object    bool // a JSON object (anything else is passed on untouched)
	method    string
	id        json.RawMessage
	idStart   int
	idEnd     int
	params    json.RawMessage
	parStart  int
	parEnd    int
	result    json.RawMessage
	errorJSON json.RawMessage
}

func (m *message) hasID() bool { return m.id != nil && string(m.id) != "null" }

// isRequest: a method and an id; a notification has a method only; a
// response has an id only.
func (m *message) isRequest() bool  { return m.object && m.method != "" && m.hasID() }
func (m *message) isResponse() bool { return m.object && m.method == "" && m.id != nil }

// parse reads the top level of a JSON-RPC message. A line that is not a
// single JSON object (a batch, garbage) comes back with object false.
func parse(line []byte) message {
	var m message
	dec := json.NewDecoder(bytes.NewReader(line))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return m
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return message{}
		}
		key, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return message{}
		}
		end := int(dec.InputOffset())
		start := end - len(raw)
		switch key {
		case "method":
			_ = json.Unmarshal(raw, &m.method)
		case "id":
			m.id, m.idStart, m.idEnd = raw, start, end
		case "params":
			m.params, m.parStart, m.parEnd = raw, start, end
		case "result":
			m.result = raw
		case "error":
			m.errorJSON = raw
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return message{}
	}
	if _, err := dec.Token(); err != io.EOF {
		return message{} // something after the object
	}
	m.object = true
	return m
}

// splice replaces line[start:end] with repl.
func splice(line []byte, start, end int, repl []byte) []byte {
	out := make([]byte, 0, len(line)-(end-start)+len(repl)+1)
	out = append(out, line[:start]...)
	out = append(out, repl...)
	return append(out, line[end:]...)
}

// rpcError is a JSON-RPC error response from the relay itself.
func rpcError(id json.RawMessage, code int, msg string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{"2.0", id, struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	return b
}

// JSON-RPC error codes the relay answers with.
const (
	codeInternal = -32603
	codeRelay    = -32000 // the server error range: hemra's own refusals
)
