// Package executor applies a Plan: it runs each planned attempt's agent,
// verify and judge stages through a sandbox provider, speaks the harness
// protocol, and records every status transition and outcome in the state
// as it happens. It does not decide what runs (planner) nor how a sandbox
// isolates (sandbox).
package executor
