// Package judgefile reads a judge folder's judge.toml into a
// rubric.Rubric: the judge file format of Harbor's rewardkit, unchanged,
// plus hemra's keys for what a judge sees of an attempt (see package
// rubric). Every problem is an hcl.Diagnostic at its line in the file — a
// TOML syntax error, an unknown key (with the closest known one), a value
// of the wrong type or out of range, a prompt template or reference that
// is missing or outside the folder — so `hemra validate` reports a judge
// file as it reports HCL and task.toml.
//
// It reads files only inside the judge folder, and never runs anything.
package judgefile
