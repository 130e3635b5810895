// Package results is the one results model of hemra: it reads the state
// (as a reader, in one read transaction, so also while an apply writes)
// into per-attempt, per-task and per eval × harness figures, and every
// reader of results renders from it: `hemra show`, `hemra compare`,
// `hemra export`, the end-of-apply summary and the web view. No command
// computes a pass rate of its own.
//
// What it owns:
//   - the model (model.go): Attempt, Task, Group (eval × harness), Results,
//     built by Load from the state's per-attempt summaries (state.Summary);
//   - the statistics (stats.go): means with CLT standard errors clustered
//     by task, 95% intervals, paired differences, unbiased pass@k, with
//     gonum's distributions;
//   - Compare (compare.go) and its text and Markdown renderings
//     (render.go), the JSON being the Comparison itself;
//   - export of runs, attempts and evals × harnesses as a self-contained
//     folder or .tar.gz, in hemra's layout or Harbor's job layout
//     (export.go, harborexport.go), and import of Harbor job folders and
//     hemra exports into a store (import.go), through package harborjob
//     for Harbor's file formats.
//
// What it does not do: run or plan anything, or print. Mean rewards count
// an ended attempt without a reward as 0 (as Harbor does) and say how many
// those were; attempts still running are not counted yet.
package results
