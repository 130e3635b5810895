package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// usage is what a response says it cost.
type usage struct {
	model         string
	input, output int64
	cost          *float64
}

// usageFields covers the three wire formats: OpenAI chat completions
// (prompt_tokens, completion_tokens), OpenAI responses and Anthropic
// messages (input_tokens, output_tokens), and OpenRouter's cost.
type usageFields struct {
	PromptTokens     *int64   `json:"prompt_tokens"`
	CompletionTokens *int64   `json:"completion_tokens"`
	InputTokens      *int64   `json:"input_tokens"`
	OutputTokens     *int64   `json:"output_tokens"`
	Cost             *float64 `json:"cost"`
}

// envelope is where usage sits in a response body or a stream event:
// at the top, in a streamed Anthropic message_start's message, or in a
// streamed OpenAI responses event's response.
type envelope struct {
	Model    string       `json:"model"`
	Usage    *usageFields `json:"usage"`
	Message  *envelope    `json:"message"`
	Response *envelope    `json:"response"`
}

// parseUsage reads the usage from a JSON body or, for a stream, from
// every server-sent event, keeping each field's last reported value
// (streams report running totals).
func parseUsage(body []byte, stream bool) usage {
	var u usage
	if !stream {
		u.add(body)
		return u
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if len(data) == 0 || data[0] != '{' {
			continue // [DONE]
		}
		u.add(data)
	}
	return u
}

func (u *usage) add(data []byte) {
	var e envelope
	if json.Unmarshal(data, &e) != nil {
		return
	}
	for _, x := range []*envelope{&e, e.Message, e.Response} {
		if x == nil {
			continue
		}
		if x.Model != "" {
			u.model = x.Model
		}
		f := x.Usage
		if f == nil {
			continue
		}
		if v := first(f.InputTokens, f.PromptTokens); v != nil && *v > 0 {
			u.input = *v
		}
		if v := first(f.OutputTokens, f.CompletionTokens); v != nil && *v > 0 {
			u.output = *v
		}
		if f.Cost != nil {
			c := *f.Cost
			u.cost = &c
		}
	}
}

func first(vs ...*int64) *int64 {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

func parseCost(s string) *float64 {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 {
		return nil
	}
	return &f
}
