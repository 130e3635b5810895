// Package harnesskit is the small Go package for harness authors: it reads
// run.start, writes events and the result, and watches for run.cancel, so a
// harness is a function.
package harnesskit
