package judgeruntime

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hemra-dev/hemra/rubric"
)

// callPath is where a call of api goes.
func callPath(api string) string {
	switch api {
	case APIResponses:
		return "/v1/responses"
	case APIMessages:
		return "/v1/messages"
	}
	return "/v1/chat/completions"
}

// thinkingBudget is the thinking budget LiteLLM gives an Anthropic model
// for each reasoning effort.
var thinkingBudget = map[string]int{"low": 1024, "medium": 2048, "high": 4096}

// request is one call's body: the system prompt, the user content, and
// the answer's schema where the API takes one.
func (j *Job) request(system string, user []block, schema json.RawMessage) ([]byte, error) {
	r := &j.Rubric
	body := map[string]any{"model": j.Model}
	switch j.API {
	case APIMessages:
		maxTokens := r.MaxTokens
		if maxTokens == 0 {
			maxTokens = rubric.DefaultMaxTokens
		}
		if b, ok := thinkingBudget[r.ReasoningEffort]; ok {
			body["thinking"] = map[string]any{"type": "enabled", "budget_tokens": b}
			maxTokens += b
		}
		body["max_tokens"] = maxTokens
		body["system"] = system
		var content []any
		for _, b := range user {
			if b.MediaType != "" {
				content = append(content, map[string]any{"type": "image", "source": map[string]any{
					"type": "base64", "media_type": b.MediaType, "data": base64.StdEncoding.EncodeToString(b.Data)}})
			} else {
				content = append(content, map[string]any{"type": "text", "text": b.Text})
			}
		}
		if len(content) == 0 {
			// The API needs a user turn; LiteLLM sends this one.
			content = []any{map[string]any{"type": "text", "text": "."}}
		}
		body["messages"] = []any{map[string]any{"role": "user", "content": content}}
	case APIResponses:
		body["instructions"] = system
		var content []any
		for _, b := range user {
			if b.MediaType != "" {
				content = append(content, map[string]any{"type": "input_image", "image_url": dataURL(b)})
			} else {
				content = append(content, map[string]any{"type": "input_text", "text": b.Text})
			}
		}
		if len(content) > 0 {
			body["input"] = []any{map[string]any{"role": "user", "content": content}}
		} else {
			body["input"] = "."
		}
		body["text"] = map[string]any{"format": map[string]any{"type": "json_schema", "name": "judge_response", "schema": schema, "strict": true}}
		if r.ReasoningEffort != "" {
			body["reasoning"] = map[string]any{"effort": r.ReasoningEffort}
		}
		if r.MaxTokens > 0 {
			body["max_output_tokens"] = r.MaxTokens
		}
	default:
		msgs := []any{map[string]any{"role": "system", "content": system}}
		if len(user) > 0 {
			var content []any
			for _, b := range user {
				if b.MediaType != "" {
					content = append(content, map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURL(b)}})
				} else {
					content = append(content, map[string]any{"type": "text", "text": b.Text})
				}
			}
			msgs = append(msgs, map[string]any{"role": "user", "content": content})
		}
		body["messages"] = msgs
		body["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "judge_response", "schema": schema, "strict": true}}
		if r.ReasoningEffort != "" {
			body["reasoning_effort"] = r.ReasoningEffort
		}
		if r.MaxTokens > 0 {
			body["max_completion_tokens"] = r.MaxTokens
		}
	}
	return json.Marshal(body)
}

// answerText is the assistant's text in a response body of api.
func answerText(api string, body []byte) (string, error) {
	switch api {
	case APIMessages:
		var m struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			return "", fmt.Errorf("the response is not a message: %v", err)
		}
		var parts []string
		for _, c := range m.Content {
			if c.Type == "text" {
				parts = append(parts, c.Text)
			}
		}
		return strings.Join(parts, ""), nil
	case APIResponses:
		var m struct {
			Output []struct {
				Type    string `json:"type"`
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			return "", fmt.Errorf("the response is not a response object: %v", err)
		}
		var parts []string
		for _, o := range m.Output {
			if o.Type != "message" {
				continue
			}
			for _, c := range o.Content {
				if c.Type == "output_text" {
					parts = append(parts, c.Text)
				}
			}
		}
		return strings.Join(parts, ""), nil
	}
	var m struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
				Refusal *string `json:"refusal"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return "", fmt.Errorf("the response is not a chat completion: %v", err)
	}
	if len(m.Choices) == 0 {
		return "", fmt.Errorf("the chat completion has no choices")
	}
	msg := m.Choices[0].Message
	if msg.Content == nil {
		if msg.Refusal != nil {
			return "", fmt.Errorf("the model refused: %s", *msg.Refusal)
		}
		return "", nil
	}
	return *msg.Content, nil
}

// errorMessage is the message of a provider's (or the gateway's) error
// body, in either format, and its type.
func errorMessage(body []byte) (typ, msg string) {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || len(e.Error) == 0 {
		return "", strings.TrimSpace(string(body[:min(len(body), 300)]))
	}
	var inner struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	if json.Unmarshal(e.Error, &inner) != nil {
		var s string
		_ = json.Unmarshal(e.Error, &s)
		return "", s
	}
	return inner.Type, inner.Message
}
