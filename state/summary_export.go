package state

// SummaryOf is the summary the state keeps of an attempt (and rewrites on
// every change of it): for a reader that has the whole record and wants
// the same compact view the summaries index gives.
func SummaryOf(a *Attempt) Summary { return summaryOf(a) }
