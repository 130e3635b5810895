package config

import (
	"net/url"
	"strings"
)

// Judge providers and APIs (see Judge.ResolvedProvider, ResolvedAPI).
const (
	ProviderOpenAI     = "openai"    // OpenAI-compatible
	ProviderAnthropic  = "anthropic" // Anthropic's messages API
	APIChatCompletions = "chat_completions"
	APIResponses       = "responses"
	APIMessages        = "messages"
)

// ResolvedProvider is the model API the judge speaks: provider when set,
// else what base_url's host says (api.anthropic.com, api.openai.com), else
// the provider prefix of judge.toml's model ("anthropic/..."), else
// OpenAI-compatible.
func (j *Judge) ResolvedProvider() string {
	if j.Provider != "" {
		return j.Provider
	}
	if u, err := url.Parse(j.BaseURL); err == nil {
		switch h := u.Hostname(); {
		case h == "anthropic.com" || strings.HasSuffix(h, ".anthropic.com"):
			return ProviderAnthropic
		case h == "openai.com" || strings.HasSuffix(h, ".openai.com"):
			return ProviderOpenAI
		}
	}
	if j.Rubric != nil && j.Rubric.Provider() == ProviderAnthropic {
		return ProviderAnthropic
	}
	return ProviderOpenAI
}

// ResolvedAPI is the API the judge runtime calls: Anthropic's messages, or
// OpenAI's chat completions unless api = "responses".
func (j *Judge) ResolvedAPI() string {
	if j.ResolvedProvider() == ProviderAnthropic {
		return APIMessages
	}
	if j.API != "" {
		return j.API
	}
	return APIChatCompletions
}

// ResolvedModel is the model the judge asks for: model when set (sent as
// written), else judge.toml's without its provider prefix.
func (j *Judge) ResolvedModel() string {
	if j.Model != "" || j.Rubric == nil {
		return j.Model
	}
	return j.Rubric.ModelName()
}
