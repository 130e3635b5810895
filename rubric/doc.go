// Package rubric reads a judge folder: its judge.toml, in the judge file
// format of Harbor's rewardkit ([judge] with the model and what the judge
// reads, [[criterion]] entries of type binary, likert or numeric, and an
// optional [scoring] table), and its prompt template. An existing rewardkit
// judge file loads unchanged; hemra adds a few keys that say which of the
// attempt's records the judge sees (instruction, last_message, artifacts,
// workdir, trajectory, verifier) and two criterion keys (negate, optional).
//
// It also holds what a judge does with a rubric, so that hemra and its
// judge runtime (cmd/hemra-judge) agree on it: the prompt (rewardkit's
// criteria block and templates), the JSON schema of the answer, how an
// answer is parsed and normalised, and how criterion scores aggregate.
//
// It does not call a model (cmd/hemra-judge does, through the gateway
// package), decide what a judge sees of an attempt (the executor does), or
// touch the store.
package rubric
