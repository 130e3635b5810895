package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hemra-dev/hemra/internal/hostsock"
)

// Providers: the model APIs the gateway speaks.
const (
	OpenAI    = "openai"    // OpenAI-compatible: chat completions and responses
	Anthropic = "anthropic" // Anthropic messages
)

// Paths are the model-call paths forwarded for each provider.
var Paths = map[string][]string{
	OpenAI:    {"/v1/chat/completions", "/v1/responses"},
	Anthropic: {"/v1/messages"},
}

// SocketName is the socket's service name: the socket is
// <folder>/model.sock.
const SocketName = "model"

// Defaults.
const (
	DefaultMaxBody   = 32 << 20 // request bytes
	DefaultMaxRecord = 32 << 20 // response bytes kept per call
	anthropicVersion = "2023-06-01"
)

// Blobs stores a recorded body and returns its SHA-256 (state.Store).
type Blobs interface {
	PutBlob(data []byte) (string, error)
}

// Config is one gateway's settings.
type Config struct {
	// BaseURL is where calls go ("https://api.openai.com/v1"). A path
	// ending in /v1 takes the call's path without its /v1.
	BaseURL  string
	Provider string // OpenAI or Anthropic
	// Key is the API key, added to each forwarded call. "" forwards
	// without one (a local model server).
	Key string
	// MaxCalls bounds the forwarded calls; 0 means no bound.
	MaxCalls int
	// Timeout bounds each forwarded call, body included; 0 means none.
	Timeout time.Duration
	// Blobs keeps each call's bodies; nil keeps none.
	Blobs Blobs
	// Transport sends forwarded calls; nil is a dedicated
	// http.Transport.
	Transport http.RoundTripper
	// MaxBody and MaxRecord override DefaultMaxBody and DefaultMaxRecord.
	MaxBody, MaxRecord int64
}

// Call is one call the judge made, forwarded or refused.
type Call struct {
	Seq      int           `json:"seq"` // 1-based, in the order calls arrived
	Method   string        `json:"method"`
	Path     string        `json:"path"`
	Model    string        `json:"model,omitempty"`
	Stream   bool          `json:"stream,omitempty"`
	Status   int           `json:"status"`
	Duration time.Duration `json:"duration_ns"`
	// Tokens and cost as the provider reported them (0 / nil: not
	// reported).
	InputTokens  int64    `json:"input_tokens,omitempty"`
	OutputTokens int64    `json:"output_tokens,omitempty"`
	CostUSD      *float64 `json:"cost_usd,omitempty"`
	// Refused says why the gateway answered itself: "path" (403),
	// "max_calls" (429), "body" (413); "" for a forwarded call.
	Refused string `json:"refused,omitempty"`
	// Error is what went wrong forwarding (upstream unreachable, a
	// timeout), or the refusal's message.
	Error string `json:"error,omitempty"`
	// Timeout: the call ran past Config.Timeout.
	Timeout bool `json:"timeout,omitempty"`
	// RequestBlob and ResponseBlob are the bodies' SHA-256 in Blobs.
	RequestBlob       string `json:"request_blob,omitempty"`
	ResponseBlob      string `json:"response_blob,omitempty"`
	ResponseTruncated bool   `json:"response_truncated,omitempty"`
}

// Gateway serves one judge instance.
type Gateway struct {
	cfg      Config
	base     *url.URL
	allowed  []string
	rt       http.RoundTripper
	ownRT    *http.Transport
	sock     *hostsock.Socket
	srv      *http.Server
	served   chan struct{}
	mu       sync.Mutex
	seq      int
	forwards int
	calls    []Call
	blobErr  error
}

// New checks cfg and makes a gateway that is not serving yet: Start
// serves it on a socket, Handler serves it anywhere else (tests,
// benchmarks).
func New(cfg Config) (*Gateway, error) {
	allowed, ok := Paths[cfg.Provider]
	if !ok {
		return nil, fmt.Errorf("gateway: unknown provider %q (openai or anthropic)", cfg.Provider)
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("gateway: base_url %q is not an absolute URL", cfg.BaseURL)
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxRecord <= 0 {
		cfg.MaxRecord = DefaultMaxRecord
	}
	g := &Gateway{cfg: cfg, base: base, allowed: allowed, rt: cfg.Transport}
	if g.rt == nil {
		g.ownRT = &http.Transport{
			Proxy:               nil, // never through a proxy the judge could name
			DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:   true,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
		}
		g.rt = g.ownRT
	}
	return g, nil
}

// Start serves the gateway on a new socket in a private folder.
func (g *Gateway) Start() error {
	s, err := hostsock.Listen(SocketName)
	if err != nil {
		return err
	}
	g.sock = s
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second}
	g.served = make(chan struct{})
	go func() {
		defer close(g.served)
		_ = g.srv.Serve(s)
	}()
	return nil
}

// Dir is the socket's private folder (what a container mounts).
func (g *Gateway) Dir() string { return g.sock.Dir }

// SocketPath is the socket on the host.
func (g *Gateway) SocketPath() string { return g.sock.Path }

// Close stops serving, ends calls in flight, and removes the socket and
// its folder. Calls stays readable.
func (g *Gateway) Close() error {
	var err error
	if g.srv != nil {
		err = g.srv.Close()
		<-g.served
		if cerr := g.sock.Close(); err == nil {
			err = cerr
		}
	}
	if g.ownRT != nil {
		g.ownRT.CloseIdleConnections()
	}
	return err
}

// Calls returns the calls recorded so far, in the order they arrived.
func (g *Gateway) Calls() []Call {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := slices.Clone(g.calls)
	slices.SortFunc(out, func(a, b Call) int { return a.Seq - b.Seq })
	return out
}

// Err is the first failure to keep a body, if any: the calls themselves
// went through, but their record is incomplete.
func (g *Gateway) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.blobErr
}

// ServeHTTP forwards or refuses one call.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	c := Call{Method: r.Method, Path: r.URL.Path}
	g.mu.Lock()
	g.seq++
	c.Seq = g.seq
	g.mu.Unlock()

	if r.Method != http.MethodPost || !slices.Contains(g.allowed, r.URL.Path) {
		g.refuse(w, &c, start, http.StatusForbidden, "path", fmt.Sprintf(
			"hemra's model gateway forwards only POST %s (provider %s); %s %s is refused",
			strings.Join(g.allowed, " and "), g.cfg.Provider, r.Method, r.URL.Path), nil)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, g.cfg.MaxBody+1))
	if err != nil {
		g.refuse(w, &c, start, http.StatusBadRequest, "body", "reading the request: "+err.Error(), nil)
		return
	}
	if int64(len(body)) > g.cfg.MaxBody {
		g.refuse(w, &c, start, http.StatusRequestEntityTooLarge, "body", fmt.Sprintf("the request is larger than %d bytes", g.cfg.MaxBody), nil)
		return
	}
	var head struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &head)
	c.Model, c.Stream = head.Model, head.Stream

	g.mu.Lock()
	over := g.cfg.MaxCalls > 0 && g.forwards >= g.cfg.MaxCalls
	if !over {
		g.forwards++
	}
	n := g.forwards
	g.mu.Unlock()
	if over {
		g.refuse(w, &c, start, http.StatusTooManyRequests, "max_calls", fmt.Sprintf(
			"max_calls (%d) reached: hemra's model gateway refused call %d", g.cfg.MaxCalls, n+1), body)
		return
	}
	g.forward(w, r, &c, start, body)
}

// upstream is the URL a call to path goes to.
func (g *Gateway) upstream(path, query string) string {
	u := *g.base
	bp := strings.TrimSuffix(u.Path, "/")
	if strings.HasSuffix(bp, "/v1") {
		u.Path = bp + strings.TrimPrefix(path, "/v1")
	} else {
		u.Path = bp + path
	}
	u.RawPath = ""
	switch {
	case u.RawQuery == "":
		u.RawQuery = query
	case query != "":
		u.RawQuery += "&" + query
	}
	return u.String()
}

// forwardHeaders are the request headers a judge may send on.
var forwardHeaders = []string{"Content-Type", "Accept", "User-Agent", "Anthropic-Version", "Anthropic-Beta", "Openai-Beta"}

// dropResponseHeaders are not passed back to the judge.
var dropResponseHeaders = []string{"Set-Cookie", "Connection", "Keep-Alive", "Transfer-Encoding", "Content-Length"}

func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, c *Call, start time.Time, body []byte) {
	ctx := r.Context()
	if g.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.cfg.Timeout)
		defer cancel()
	}
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, g.upstream(r.URL.Path, r.URL.RawQuery), bytes.NewReader(body))
	if err != nil {
		g.fail(w, c, start, body, http.StatusBadGateway, err)
		return
	}
	for _, h := range forwardHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			out.Header[h] = slices.Clone(v)
		}
	}
	switch g.cfg.Provider {
	case Anthropic:
		if out.Header.Get("Anthropic-Version") == "" {
			out.Header.Set("Anthropic-Version", anthropicVersion)
		}
		if g.cfg.Key != "" {
			out.Header.Set("X-Api-Key", g.cfg.Key)
		}
	default:
		if g.cfg.Key != "" {
			out.Header.Set("Authorization", "Bearer "+g.cfg.Key)
		}
	}
	if out.Header.Get("Content-Type") == "" {
		out.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.rt.RoundTrip(out)
	if err != nil {
		g.fail(w, c, start, body, http.StatusBadGateway, err)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if !slices.Contains(dropResponseHeaders, k) {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	c.Status = resp.StatusCode
	rec := &limitedBuffer{max: g.cfg.MaxRecord}
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	var copyErr error
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			rec.Write(buf[:n])
			if _, werr := w.Write(buf[:n]); werr != nil {
				copyErr = fmt.Errorf("the judge stopped reading: %w", werr)
				break
			}
			_ = rc.Flush()
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			copyErr = rerr
			break
		}
	}
	if copyErr != nil {
		c.Error = g.redact(copyErr.Error())
		if errors.Is(copyErr, context.DeadlineExceeded) {
			c.Timeout = true
			c.Error = fmt.Sprintf("the response did not finish within %s", g.cfg.Timeout)
		}
	}
	u := parseUsage(rec.Bytes(), c.Stream || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"))
	c.InputTokens, c.OutputTokens, c.CostUSD = u.input, u.output, u.cost
	if u.model != "" {
		c.Model = u.model
	}
	if v := resp.Header.Get("X-Litellm-Response-Cost"); v != "" && c.CostUSD == nil {
		c.CostUSD = parseCost(v)
	}
	c.ResponseTruncated = rec.truncated
	g.record(c, start, body, rec.Bytes())
}

// fail answers a call that could not be forwarded: 504 after a timeout,
// else 502, in the provider's error format.
func (g *Gateway) fail(w http.ResponseWriter, c *Call, start time.Time, body []byte, status int, err error) {
	msg := g.redact(err.Error())
	if errors.Is(err, context.DeadlineExceeded) {
		status, c.Timeout = http.StatusGatewayTimeout, true
		msg = fmt.Sprintf("the model did not answer within %s", g.cfg.Timeout)
	}
	c.Status, c.Error = status, "forwarding to "+g.base.Host+": "+msg
	resp := g.errorBody("hemra_gateway_error", c.Error)
	writeJSON(w, status, resp)
	g.record(c, start, body, resp)
}

// refuse answers a call the gateway does not forward.
func (g *Gateway) refuse(w http.ResponseWriter, c *Call, start time.Time, status int, why, msg string, body []byte) {
	c.Status, c.Refused, c.Error = status, why, msg
	resp := g.errorBody("hemra_gateway_refused_"+why, msg)
	writeJSON(w, status, resp)
	g.record(c, start, body, resp)
}

// errorBody is an error in the provider's own format, so the judge's
// client reads it as it reads the provider's.
func (g *Gateway) errorBody(typ, msg string) []byte {
	var v any
	if g.cfg.Provider == Anthropic {
		v = map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}}
	} else {
		v = map[string]any{"error": map[string]any{"type": typ, "message": msg, "code": typ}}
	}
	b, _ := json.Marshal(v)
	return b
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// record keeps the call and its bodies.
func (g *Gateway) record(c *Call, start time.Time, req, resp []byte) {
	c.Duration = time.Since(start)
	if g.cfg.Blobs != nil {
		var errs []error
		if len(req) > 0 {
			sha, err := g.cfg.Blobs.PutBlob(g.redactBytes(req))
			c.RequestBlob, errs = sha, append(errs, err)
		}
		if len(resp) > 0 {
			sha, err := g.cfg.Blobs.PutBlob(g.redactBytes(resp))
			c.ResponseBlob, errs = sha, append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			g.mu.Lock()
			if g.blobErr == nil {
				g.blobErr = fmt.Errorf("keeping the bodies of model call %d: %w", c.Seq, err)
			}
			g.mu.Unlock()
		}
	}
	g.mu.Lock()
	g.calls = append(g.calls, *c)
	g.mu.Unlock()
}

const redacted = "[redacted by hemra]"

func (g *Gateway) redact(s string) string {
	if g.cfg.Key == "" {
		return s
	}
	return strings.ReplaceAll(s, g.cfg.Key, redacted)
}

func (g *Gateway) redactBytes(b []byte) []byte {
	if g.cfg.Key == "" || !bytes.Contains(b, []byte(g.cfg.Key)) {
		return b
	}
	return bytes.ReplaceAll(b, []byte(g.cfg.Key), []byte(redacted))
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	max       int64
	truncated bool
}

func (b *limitedBuffer) Write(p []byte) {
	room := b.max - int64(b.Len())
	if int64(len(p)) > room {
		p, b.truncated = p[:max(room, 0)], true
	}
	b.Buffer.Write(p)
}
