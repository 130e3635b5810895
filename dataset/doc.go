// Package dataset reads tasks: local folders of Harbor-format task
// directories (task.toml, instruction.md, environment/, tests/, solution/,
// steps/) and JSONL files of inputs. It hashes file contents for
// fingerprints and keeps unknown task.toml keys. It does not decide what
// runs (planner) or how tasks run (executor).
package dataset
