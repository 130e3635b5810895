// Package planner turns a Config and the prior state into a Plan: it
// expands evals into attempts, computes each stage's fingerprint, resolves
// image references to digests, checks required capabilities, and explains
// every action. Planning is one pure call; renderings (text, Markdown,
// JSON) and the saved plan file are forms of the one Plan value. It never
// runs anything and never writes the state.
package planner
