// Package harborjob reads and writes Harbor's job folders
// (jobs/<job_name>/ with result.json, config.json and one folder per trial
// with its result.json, config.json, agent/, verifier/ and artifacts/), in
// the types of Harbor's own models. It knows nothing of hemra's state:
// package results maps between the two.
//
// Reading never follows a symbolic link and never fails on one bad file:
// what cannot be read is a Diagnostic naming the file.
package harborjob
