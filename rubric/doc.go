// Package rubric is a judge's rubric, as a judge.toml in the judge file
// format of Harbor's rewardkit declares it (package judgefile reads one):
// the model, what the judge reads, [[criterion]] entries of type binary,
// likert or numeric, and the [scoring] aggregation; plus hemra's keys for
// which of the attempt's records the judge sees (instruction,
// last_message, artifacts, workdir, trajectory, verifier) and two
// criterion keys (negate, optional).
//
// It also holds what a judge does with a rubric, so that hemra and its
// judge runtime (cmd/hemra-judge) agree on it: the prompt (rewardkit's
// criteria block and templates), the JSON schema of the answer, how an
// answer is parsed and normalised, and how criterion scores aggregate.
//
// It imports the standard library only: the judge runtime, a static
// program built from hemra's embedded sources, imports it.
//
// It does not read files, call a model (cmd/hemra-judge does, through the
// gateway package), decide what a judge sees of an attempt (the executor
// does), or touch the store.
package rubric
