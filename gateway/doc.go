// Package gateway is hemra's model gateway: the only way a judge reaches
// its model. One Gateway serves one judge instance on a Unix socket in a
// private folder (internal/hostsock), which the executor mounts into the
// judge's container (or hands to a local judge process by path).
//
// A call is forwarded to the judge's base_url only when it is one of its
// provider's model calls — POST /v1/chat/completions or /v1/responses for
// an OpenAI-compatible API, POST /v1/messages for Anthropic's — and only
// up to max_calls of them. The gateway adds the API key there (Bearer for
// OpenAI, x-api-key for Anthropic) and drops every credential header the
// judge sent; responses, streamed ones included, are passed through as
// they arrive. Every other path gets 403 and the call past max_calls gets
// 429, each with an error body in the provider's own format, and both are
// recorded.
//
// Each call is recorded: its request and response bodies as blobs (the
// key, should it ever appear in one, replaced), the model, the status, the
// duration, the input and output tokens, and the cost where the provider
// reports one (an OpenRouter-style usage.cost, or a LiteLLM proxy's
// x-litellm-response-cost header).
//
// The key lives in this process's memory only: never in the judge's
// environment, a recorded body, an error message or the store.
//
// It does not know about judges, rubrics, attempts or the state: the
// executor starts one per judge instance, reads its calls and records
// them.
package gateway
