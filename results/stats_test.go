package results

import (
	"math"
	"testing"
)

// The numbers below are worked out by hand from the formulas of Miller,
// "Adding Error Bars to Evals" (2024), and Chen et al. (2021), not with
// the code under test: z is the literal 97.5% normal quantile.
const zHand = 1.959963984540054

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("%s = %.12f, want %.12f", what, got, want)
	}
}

// TestClusteredMeanHandWorked: six attempts on three tasks.
//
//	task A: 1, 1    task B: 0, 0    task C: 1, 0
//
// mean = 3/6 = 0.5; deviations A: +.5 +.5, B: −.5 −.5, C: +.5 −.5.
// Sample variance = Σd²/(n−1) = 6·0.25/5 = 0.3, so SE²(CLT) = 0.3/6 = 0.05.
// Cross terms Σ_c Σ_{i≠j} d_i d_j: A 2·(.5·.5) = .5, B 2·(.5·.5) = .5,
// C 2·(.5·−.5) = −.5; total .5, over n² = 36.
// SE² = 0.05 + 0.5/36 = 0.0638888…, SE = 0.25276251…
func TestClusteredMeanHandWorked(t *testing.T) {
	e := clusteredMean([]float64{1, 1, 0, 0, 1, 0}, []int{0, 0, 1, 1, 2, 2})
	se := math.Sqrt(0.05 + 0.5/36)
	near(t, "mean", e.Mean, 0.5)
	near(t, "SE", e.SE, se)
	near(t, "ci low", e.Low, 0.5-zHand*se)
	near(t, "ci high", e.High, 0.5+zHand*se)
	near(t, "SE by hand", se, 0.252762514802)
	if !e.Clustered || e.Clusters != 3 || e.N != 6 {
		t.Errorf("clustered=%v clusters=%d n=%d, want true 3 6", e.Clustered, e.Clusters, e.N)
	}

	// One attempt per task: the plain CLT SE, sqrt(var/n). For 1, 0, 1, 1:
	// mean .75, Σd² = 3·.0625 + .5625 = .75, var = .25, SE² = .25/4.
	e = clusteredMean([]float64{1, 0, 1, 1}, []int{0, 1, 2, 3})
	near(t, "unclustered SE", e.SE, 0.25)
	if e.Clustered {
		t.Error("one attempt per task is not clustered")
	}
	if e := clusteredMean([]float64{1}, []int{0}); e.HasInterval() {
		t.Errorf("one observation has no SE, got %v", e.SE)
	}
}

// TestPairedDifferenceHandWorked: per-task means of A and B on four tasks.
//
//	A: 1, .5, 0, 1    B: 1, 1, .5, 0    d = B − A: 0, .5, .5, −1
//
// mean d = 0; var d = (0 + .25 + .25 + 1)/3 = .5; SE = sqrt(.5/4).
func TestPairedDifferenceHandWorked(t *testing.T) {
	p := pairedDifference([]float64{1, .5, 0, 1}, []float64{1, 1, .5, 0})
	se := math.Sqrt(0.5 / 4)
	near(t, "mean diff", p.Diff.Mean, 0)
	near(t, "SE", p.Diff.SE, se)
	near(t, "ci high", p.Diff.High, zHand*se)
	near(t, "A mean", p.A, 0.625)
	near(t, "B mean", p.B, 0.625)
	// Pearson r: A dev .375 −.125 −.625 .375, B dev .375 .375 −.125 −.625;
	// Σ products = .140625 − .046875 + .078125 − .234375 = −.0625;
	// Σ A dev² = .6875, Σ B dev² = .6875; r = −.0625/.6875.
	near(t, "correlation", *p.Correlation, -0.0625/0.6875)
}

// TestPassAtKHandWorked: n = 5 attempts, c = 2 passed.
// pass@1 = c/n = .4; pass@2 = 1 − C(3,2)/C(5,2) = 1 − 3/10 = .7;
// pass@3 = 1 − C(3,3)/C(5,3) = 1 − 1/10 = .9; pass@4 = 1 (n − c < k).
func TestPassAtKHandWorked(t *testing.T) {
	for k, want := range map[int]float64{1: .4, 2: .7, 3: .9, 4: 1, 5: 1} {
		near(t, "pass@k", passAtK(5, 2, k), want)
	}
	// Over two tasks (5 attempts, 2 passed; 3 attempts, 0 passed): k stops
	// at 3, the fewest attempts; pass@2 = (.7 + 0)/2.
	got := passAtKs([]int{5, 3}, []int{2, 0})
	if len(got) != 3 {
		t.Fatalf("pass@k for k = 1..%d, want 1..3", len(got))
	}
	near(t, "pass@2 over tasks", got[1].Value, 0.35)
}
