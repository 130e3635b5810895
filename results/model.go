package results

import (
	"sort"
	"time"

	"github.com/hemra-dev/hemra/state"
)

// FormatVersion is the version of the results JSON (`hemra show -json`,
// `hemra compare -json`). A field added is not a new version; a field
// changed or removed is.
const FormatVersion = "1"

// Attempt is one attempt as the results see it.
type Attempt struct {
	Address    string             `json:"address"`
	ID         string             `json:"id"`
	RunID      string             `json:"run_id,omitempty"`
	Eval       string             `json:"eval"`
	Harness    string             `json:"harness"`
	Task       string             `json:"task"`
	Repetition int                `json:"repetition"`
	Status     state.Status       `json:"status"`
	Class      state.Class        `json:"class,omitempty"`
	Reward     *float64           `json:"reward"` // null: no reward (counted as 0 once ended)
	Rewards    map[string]float64 `json:"rewards,omitempty"`
	Error      string             `json:"error,omitempty"`
	StartedAt  *time.Time         `json:"started_at,omitempty"`
	FinishedAt *time.Time         `json:"finished_at,omitempty"`
	// Duration is FinishedAt − StartedAt in seconds, 0 while it runs.
	Duration float64                       `json:"duration_seconds,omitempty"`
	Usage    *state.TokenUsage             `json:"usage,omitempty"`
	Judges   map[string]state.JudgeSummary `json:"judges,omitempty"`
	Imported bool                          `json:"imported,omitempty"`
}

// Ended reports whether the attempt will not change again.
func (a *Attempt) Ended() bool { return a.Status.Terminal() }

// Counted reports whether the attempt counts in the figures: it ended, and
// not by an interruption (an interrupted attempt is neither a pass nor a
// failure: the next plan retries it).
func (a *Attempt) Counted() bool { return a.Ended() && a.Class != state.ClassInterrupted }

// Score is the attempt's reward, 0 when it has none: how Harbor counts a
// trial without a reward in its mean, and how hemra does.
func (a *Attempt) Score() float64 {
	if a.Reward == nil {
		return 0
	}
	return *a.Reward
}

// Passed reports whether the attempt's reward is at least 1.
func (a *Attempt) Passed() bool { return a.Reward != nil && *a.Reward >= 1 }

func attemptOf(s *state.Summary) *Attempt {
	a := &Attempt{
		Address: s.Address, ID: s.ID, RunID: s.RunID,
		Eval: s.Eval, Harness: s.Harness, Task: s.Task, Repetition: s.Repetition,
		Status: s.Status, Class: s.Class, Reward: s.Reward, Rewards: s.Rewards, Error: s.Error,
		Usage: s.Usage, Judges: s.Judges, Imported: s.Imported,
	}
	if t := s.StartedAt(); !t.IsZero() {
		a.StartedAt = &t
	}
	if t := s.FinishedAt(); !t.IsZero() {
		a.FinishedAt = &t
		if a.StartedAt != nil {
			a.Duration = t.Sub(*a.StartedAt).Seconds()
		}
	}
	return a
}

// Counts are how a set of attempts stands.
type Counts struct {
	Attempts int `json:"attempts"`
	// Ended attempts are the ones the figures count. Running ones (pending
	// or in a stage, during an apply) are not counted yet, nor Interrupted
	// ones (neither a pass nor a failure: the next plan retries them).
	Ended       int `json:"ended"`
	Running     int `json:"running"`
	Interrupted int `json:"interrupted"`
	Scored      int `json:"scored"` // ended with a reward
	Passed      int `json:"passed"` // reward >= 1
	// Errored attempts ended without a reward (an infrastructure,
	// protocol or verifier error): each counts as 0 in the mean reward, as
	// Harbor counts them.
	Errored int `json:"errored"`
	// ByClass counts ended and interrupted attempts by how they ended.
	ByClass map[state.Class]int `json:"by_class,omitempty"`
}

func (c *Counts) add(a *Attempt) {
	c.Attempts++
	if !a.Ended() {
		c.Running++
		return
	}
	if a.Class != "" {
		if c.ByClass == nil {
			c.ByClass = map[state.Class]int{}
		}
		c.ByClass[a.Class]++
	}
	if !a.Counted() {
		c.Interrupted++
		return
	}
	c.Ended++
	if a.Reward != nil {
		c.Scored++
	} else {
		c.Errored++
	}
	if a.Passed() {
		c.Passed++
	}
}

// Usage totals the usage harnesses reported; Attempts is how many did.
type Usage struct {
	Attempts     int     `json:"attempts"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CacheTokens  int64   `json:"cache_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

func (u *Usage) add(x *state.TokenUsage) {
	u.Attempts++
	u.InputTokens += x.InputTokens
	u.OutputTokens += x.OutputTokens
	u.CacheTokens += x.CacheTokens
	u.CostUSD += x.CostUSD
}

// Durations of the ended attempts of a set, in seconds. Wall is from the
// first start to the last end.
type Durations struct {
	Total float64 `json:"total_seconds"`
	Mean  float64 `json:"mean_seconds"`
	Wall  float64 `json:"wall_seconds"`
}

// Task is one task of an eval × harness: its attempts and their figures.
type Task struct {
	Task string `json:"task"`
	Counts
	// Reward is the mean reward of its ended attempts (missing = 0), with
	// the CLT interval over those attempts.
	Reward   *Estimate  `json:"reward,omitempty"`
	PassRate *Estimate  `json:"pass_rate,omitempty"`
	PassAtK  []PassAtK  `json:"pass_at_k,omitempty"`
	List     []*Attempt `json:"-"` // its attempts, in address order
}

// Group is one eval × harness: per-task and total figures.
type Group struct {
	Eval    string `json:"eval"`
	Harness string `json:"harness"`
	Counts
	Imported bool `json:"imported,omitempty"`
	// Reward is the mean reward over ended attempts (missing = 0), its SE
	// clustered by task.
	Reward   *Estimate `json:"reward,omitempty"`
	PassRate *Estimate `json:"pass_rate,omitempty"`
	PassAtK  []PassAtK `json:"pass_at_k,omitempty"`
	// RewardKeys has the mean of every reward key the verifier wrote
	// (reward.json), a key an attempt lacks counting as 0.
	RewardKeys map[string]*Estimate `json:"reward_keys,omitempty"`
	// Judges has the mean score of every judge, over the attempts it
	// scored.
	Judges    map[string]*Estimate `json:"judges,omitempty"`
	Usage     *Usage               `json:"usage,omitempty"`
	Durations Durations            `json:"durations"`
	Tasks     []*Task              `json:"tasks"`
}

// Name is "eval/harness", the form compare and show take.
func (g *Group) Name() string { return g.Eval + "/" + g.Harness }

// Task is the group's task with this name, or nil.
func (g *Group) Task(name string) *Task {
	i := sort.Search(len(g.Tasks), func(i int) bool { return g.Tasks[i].Task >= name })
	if i < len(g.Tasks) && g.Tasks[i].Task == name {
		return g.Tasks[i]
	}
	return nil
}

// Results are the figures of a set of attempts, per eval × harness.
type Results struct {
	FormatVersion string `json:"format_version"`
	// Selection says which attempts these are, in words.
	Selection string      `json:"selection"`
	Store     StoreInfo   `json:"store"`
	Groups    []*Group    `json:"groups"`
	Attempts  []*Attempt  `json:"attempts"`
	Counts    Counts      `json:"counts"`
	Runs      []state.Run `json:"runs,omitempty"`
}

// StoreInfo names the store results were read from.
type StoreInfo struct {
	Dir     string `json:"dir,omitempty"`
	Lineage string `json:"lineage,omitempty"`
	Serial  uint64 `json:"serial"`
}

// Group is the eval × harness with this eval and harness, or nil.
func (r *Results) Group(eval, harness string) *Group {
	for _, g := range r.Groups {
		if g.Eval == eval && g.Harness == harness {
			return g
		}
	}
	return nil
}

// build computes every figure from the attempts, which it sorts by
// address.
func build(attempts []*Attempt) *Results {
	sort.Slice(attempts, func(i, j int) bool { return attempts[i].Address < attempts[j].Address })
	r := &Results{FormatVersion: FormatVersion, Attempts: attempts, Groups: []*Group{}}
	type key struct{ eval, harness string }
	groups := map[key]*Group{}
	tasks := map[*Group]map[string]*Task{}
	for _, a := range attempts {
		r.Counts.add(a)
		k := key{a.Eval, a.Harness}
		g := groups[k]
		if g == nil {
			g = &Group{Eval: a.Eval, Harness: a.Harness, Imported: a.Imported}
			groups[k] = g
			tasks[g] = map[string]*Task{}
			r.Groups = append(r.Groups, g)
		}
		t := tasks[g][a.Task]
		if t == nil {
			t = &Task{Task: a.Task}
			tasks[g][a.Task] = t
			g.Tasks = append(g.Tasks, t)
		}
		t.List = append(t.List, a)
	}
	sort.Slice(r.Groups, func(i, j int) bool {
		if r.Groups[i].Eval != r.Groups[j].Eval {
			return r.Groups[i].Eval < r.Groups[j].Eval
		}
		return r.Groups[i].Harness < r.Groups[j].Harness
	})
	for _, g := range r.Groups {
		g.compute()
	}
	return r
}

// compute fills in a group's figures from its tasks' attempts.
func (g *Group) compute() {
	sort.Slice(g.Tasks, func(i, j int) bool { return g.Tasks[i].Task < g.Tasks[j].Task })
	var scores, passes []float64
	var cluster []int
	var ns, cs []int
	keys := map[string]bool{}
	judges := map[string][]float64{}
	judgeCluster := map[string][]int{}
	var first, last time.Time
	for ti, t := range g.Tasks {
		var tScores, tPasses []float64
		for _, a := range t.List {
			g.Counts.add(a)
			t.Counts.add(a)
			if a.Usage != nil {
				if g.Usage == nil {
					g.Usage = &Usage{}
				}
				g.Usage.add(a.Usage)
			}
			if !a.Counted() {
				continue
			}
			scores = append(scores, a.Score())
			tScores = append(tScores, a.Score())
			passes = append(passes, b2f(a.Passed()))
			tPasses = append(tPasses, b2f(a.Passed()))
			cluster = append(cluster, ti)
			for k := range a.Rewards {
				keys[k] = true
			}
			for name, j := range a.Judges {
				if j.Score != nil {
					judges[name] = append(judges[name], *j.Score)
					judgeCluster[name] = append(judgeCluster[name], ti)
				}
			}
			if a.StartedAt != nil && a.FinishedAt != nil {
				g.Durations.Total += a.Duration
				if first.IsZero() || a.StartedAt.Before(first) {
					first = *a.StartedAt
				}
				if a.FinishedAt.After(last) {
					last = *a.FinishedAt
				}
			}
		}
		t.Reward, t.PassRate = meanOf(tScores), meanOf(tPasses)
		if t.Ended > 0 {
			t.PassAtK = passAtKs([]int{t.Ended}, []int{t.Passed})
			ns, cs = append(ns, t.Ended), append(cs, t.Passed)
		}
	}
	g.Reward, g.PassRate = clusteredMean(scores, cluster), clusteredMean(passes, cluster)
	g.PassAtK = passAtKs(ns, cs)
	if g.Ended > 0 {
		g.Durations.Mean = g.Durations.Total / float64(g.Ended)
	}
	if !first.IsZero() {
		g.Durations.Wall = last.Sub(first).Seconds()
	}
	// Every reward key, an attempt without it counting 0 (as Harbor's mean
	// metric does with several keys). One key named "reward" is Reward.
	if len(keys) > 1 || len(keys) == 1 && !keys["reward"] {
		g.RewardKeys = map[string]*Estimate{}
		for k := range keys {
			xs := make([]float64, 0, len(scores))
			for _, t := range g.Tasks {
				for _, a := range t.List {
					if a.Counted() {
						xs = append(xs, a.Rewards[k])
					}
				}
			}
			g.RewardKeys[k] = clusteredMean(xs, cluster)
		}
	}
	if len(judges) > 0 {
		g.Judges = map[string]*Estimate{}
		for name, xs := range judges {
			g.Judges[name] = clusteredMean(xs, judgeCluster[name])
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
