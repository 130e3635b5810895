package planner

// SetLazyMin sets the number of attempts to run from which a plan keeps no
// manifest, for tests; it returns a function that restores it.
func SetLazyMin(n int) (restore func()) {
	old := lazyMin
	lazyMin = n
	return func() { lazyMin = old }
}

// Every plan of the package's tests that explains a change against a
// store with a built manifest checks the groups it found without one.
func init() { checkGroupRefs = true }
