package planner

// SetLazyMin sets the number of attempts to run from which a plan keeps no
// manifest, for tests; it returns a function that restores it.
func SetLazyMin(n int) (restore func()) {
	old := lazyMin
	lazyMin = n
	return func() { lazyMin = old }
}
