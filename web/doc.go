// Package web is hemra's read-only web view of a store (`hemra serve`):
// the runs, with a live view while an apply writes; the eval × harness
// matrix with pass rates, mean rewards and 95% intervals; one eval ×
// harness task by task, with filters (failed, errored, passed, running,
// flipped against another harness); a task's attempts; an attempt with
// its transitions, trajectory (messages, tool calls and results, MCP
// calls), verifier output, judge scores and calls, and its files as
// downloads; the comparison of two evals × harnesses or runs; and a saved
// plan as a reviewer sees it. Every page is also JSON (Accept:
// application/json, or the page's path with .json).
//
// Everything it shows comes from package results (the one results model)
// and, for saved plans, from the planner's own renderings: it computes no
// figure of its own and never opens state.db itself. The store is read as
// a reader, one short read transaction per page, so an apply is never
// held up; a page of a running apply reloads itself (a meta refresh: the
// pages carry no script at all).
//
// Safety. What an agent wrote (events, artifacts, model output, error
// messages) is untrusted: html/template escapes all of it, and control
// and bidirectional characters are replaced. The Content-Security-Policy
// allows the embedded stylesheet and nothing else (no script, no inline
// style, no frame). There is no write endpoint: GET and HEAD only. A URL
// never names a file: an attempt's files are found by the SHA-256 its
// record gives them and sent as attachments (application/octet-stream,
// nosniff, a sandbox CSP), plans by the name the listing gives them. On
// loopback, a request for any other Host is refused (DNS rebinding);
// beyond loopback (--expose) every request needs the access token.
//
// Templates (templates/), the stylesheet (static/) and the SVG plots are
// embedded and drawn on the server: no CDN, no JavaScript build, works
// offline.
package web
