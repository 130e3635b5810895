package results

import (
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// The statistics follow Miller, "Adding Error Bars to Evals" (2024): the
// standard error of a mean from the central limit theorem, clustered by
// task when a task has several attempts (its attempts are not independent
// draws); a 95% interval of mean ± z·SE with z the normal quantile; and
// the difference of two evals on the same tasks as a paired difference of
// their per-task means. pass@k is the unbiased estimator of Chen et al.
// (2021).

// Confidence is the coverage of every interval hemra reports.
const Confidence = 0.95

// z is the two-sided normal quantile for Confidence (1.95996...).
var z = distuv.UnitNormal.Quantile(1 - (1-Confidence)/2)

// Estimate is a mean with its standard error and 95% interval. SE, Low
// and High are nil when there are too few observations for one (fewer than
// two).
type Estimate struct {
	Mean float64  `json:"mean"`
	SE   *float64 `json:"se"`
	Low  *float64 `json:"ci_low"`
	High *float64 `json:"ci_high"`
	// N is the number of observations (attempts, or tasks for a paired
	// difference); Clusters the number of tasks they fall in.
	N        int `json:"n"`
	Clusters int `json:"clusters,omitempty"`
	// Clustered says the SE is clustered by task: some task has several
	// attempts.
	Clustered bool `json:"clustered,omitempty"`
}

// HasInterval reports whether the estimate has a standard error.
func (e *Estimate) HasInterval() bool { return e != nil && e.SE != nil }

func withSE(mean, se float64, n int) *Estimate {
	e := &Estimate{Mean: mean, N: n}
	if n >= 2 && !math.IsNaN(se) {
		lo, hi := mean-z*se, mean+z*se
		e.SE, e.Low, e.High = &se, &lo, &hi
	}
	return e
}

// meanOf is the mean of xs with its plain CLT standard error
// (sample standard deviation over √n): for observations that are
// independent draws, such as one task's attempts.
func meanOf(xs []float64) *Estimate {
	if len(xs) == 0 {
		return nil
	}
	if len(xs) == 1 {
		return &Estimate{Mean: xs[0], N: 1}
	}
	mean, variance := stat.MeanVariance(xs, nil)
	return withSE(mean, math.Sqrt(variance/float64(len(xs))), len(xs))
}

// clusteredMean is the mean of xs with its standard error clustered by
// cluster[i] (see clustered).
func clusteredMean(xs []float64, cluster []int) *Estimate {
	if len(xs) == 0 {
		return nil
	}
	idx := map[int]int{}
	var cs []clusterSums
	for i, x := range xs {
		j, ok := idx[cluster[i]]
		if !ok {
			j = len(cs)
			idx[cluster[i]] = j
			cs = append(cs, clusterSums{})
		}
		cs[j].add(x)
	}
	return clustered(cs)
}

// clusterSums are what the clustered standard error needs of one task's
// observations, so that it can be computed in one pass over attempts of
// any number (an export) without keeping them.
type clusterSums struct {
	n          int
	sum, sumSq float64
}

func (c *clusterSums) add(x float64) { c.n++; c.sum += x; c.sumSq += x * x }

// clustered is the mean of the observations of every cluster with its
// standard error clustered by cluster (Miller 2024, eq. 4): the CLT
// variance s²/n plus, for every cluster, the products of the deviations
// from the mean of each pair of distinct observations in it, over n².
// With one observation per cluster it is the plain CLT standard error.
// For a cluster, Σ_i Σ_{j≠i} d_i d_j = (Σ d)² − Σ d², and both sums follow
// from the cluster's n, Σx and Σx².
func clustered(cs []clusterSums) *Estimate {
	var n int
	var sum, sumSq float64
	multi := false
	for _, c := range cs {
		n += c.n
		sum += c.sum
		sumSq += c.sumSq
		multi = multi || c.n > 1
	}
	if n == 0 {
		return nil
	}
	mean := sum / float64(n)
	if n == 1 {
		return &Estimate{Mean: mean, N: 1, Clusters: len(cs)}
	}
	nf := float64(n)
	variance := math.Max(sumSq-nf*mean*mean, 0) / (nf - 1)
	v := variance / nf
	for _, c := range cs {
		m := float64(c.n)
		d := c.sum - m*mean                        // Σ d
		d2 := c.sumSq - 2*mean*c.sum + m*mean*mean // Σ d²
		v += (d*d - d2) / (nf * nf)
	}
	e := withSE(mean, math.Sqrt(math.Max(v, 0)), n)
	e.Clusters, e.Clustered = len(cs), multi
	return e
}

// Paired is the difference B − A of two sides over the tasks both have:
// the mean of the per-task differences of their means, with the CLT
// standard error of that mean (paired: each task is its own control).
type Paired struct {
	Tasks int       `json:"tasks"`
	A     float64   `json:"a_mean"` // A's mean of per-task means over the shared tasks
	B     float64   `json:"b_mean"`
	Diff  *Estimate `json:"difference"` // B − A
	// Correlation of the per-task means of A and B (Pearson); nil when
	// either side does not vary. High correlation is what makes the paired
	// interval narrower than the two separate ones.
	Correlation *float64 `json:"correlation,omitempty"`
}

func pairedDifference(a, b []float64) *Paired {
	if len(a) == 0 {
		return nil
	}
	d := make([]float64, len(a))
	for i := range a {
		d[i] = b[i] - a[i]
	}
	p := &Paired{Tasks: len(a), A: stat.Mean(a, nil), B: stat.Mean(b, nil), Diff: meanOf(d)}
	if len(a) >= 2 && stat.Variance(a, nil) > 0 && stat.Variance(b, nil) > 0 {
		r := stat.Correlation(a, b, nil)
		p.Correlation = &r
	}
	return p
}

// passAtK is the unbiased estimate of the chance that at least one of k
// attempts drawn from n, of which c passed, passes: 1 − C(n−c, k)/C(n, k)
// (Chen et al. 2021), as a product so it never overflows.
func passAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	p := 1.0
	for i := range k {
		p *= float64(n-c-i) / float64(n-i)
	}
	return 1 - p
}

// PassAtK is pass@k over a set of tasks: the mean over tasks of each
// task's unbiased pass@k.
type PassAtK struct {
	K     int     `json:"k"`
	Value float64 `json:"value"`
}

// passAtKs is pass@k for every k from 1 to the smallest number of ended
// attempts of any task (as Harbor bounds it), from each task's ended
// attempts n and passes c.
func passAtKs(n, c []int) []PassAtK {
	if len(n) == 0 {
		return nil
	}
	kMax := n[0]
	for _, x := range n {
		kMax = min(kMax, x)
	}
	out := make([]PassAtK, 0, kMax)
	for k := 1; k <= kMax; k++ {
		sum := 0.0
		for i := range n {
			sum += passAtK(n[i], c[i], k)
		}
		out = append(out, PassAtK{K: k, Value: sum / float64(len(n))})
	}
	return out
}
