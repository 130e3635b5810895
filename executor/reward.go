package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Reward file names in the verifier log folder, in the order Harbor reads
// them: reward.json first, else reward.txt.
const (
	rewardJSON = "reward.json"
	rewardTxt  = "reward.txt"
)

// maxRewardFile bounds how much of a reward file is read: a reward is a
// few numbers, so anything bigger is malformed.
const maxRewardFile = 1 << 20

// rewardError is a missing or malformed reward file: the attempt's verifier
// error, never a task failure.
type rewardError struct{ msg string }

func (e *rewardError) Error() string { return e.msg }

// readReward reads the verifier's reward from dir, the verifier log folder
// copied back to the host.
//
// reward.json is a flat JSON object of name → number. The attempt's reward
// is its "reward" key when present, else its only key, else the mean of all
// keys; every key is kept in rewards. reward.txt holds one number and is
// read as {"reward": x}. The test script's exit code plays no part.
func readReward(dir string) (reward float64, rewards map[string]float64, err error) {
	data, err := readSmall(filepath.Join(dir, rewardJSON))
	switch {
	case err == nil:
		return parseRewardJSON(data)
	case !errors.Is(err, os.ErrNotExist):
		return 0, nil, &rewardError{fmt.Sprintf("reading %s: %v", rewardJSON, err)}
	}
	data, err = readSmall(filepath.Join(dir, rewardTxt))
	switch {
	case err == nil:
		return parseRewardTxt(data)
	case errors.Is(err, os.ErrNotExist):
		return 0, nil, &rewardError{fmt.Sprintf("the verifier wrote no reward: neither %s nor %s in the verifier log folder", rewardJSON, rewardTxt)}
	default:
		return 0, nil, &rewardError{fmt.Sprintf("reading %s: %v", rewardTxt, err)}
	}
}

func readSmall(path string) ([]byte, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRewardFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxRewardFile {
		return nil, fmt.Errorf("larger than %d bytes", maxRewardFile)
	}
	return data, nil
}

func parseRewardJSON(data []byte) (float64, map[string]float64, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return 0, nil, &rewardError{rewardJSON + " is empty"}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return 0, nil, &rewardError{fmt.Sprintf("%s is not a JSON object of name → number (%v): %s", rewardJSON, err, firstBytes(data))}
	}
	if len(raw) == 0 {
		return 0, nil, &rewardError{rewardJSON + " holds no reward: " + firstBytes(data)}
	}
	rewards := make(map[string]float64, len(raw))
	names := make([]string, 0, len(raw))
	for name, v := range raw {
		var f float64
		if err := json.Unmarshal(v, &f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, nil, &rewardError{fmt.Sprintf("%s: %q is not a number: %s", rewardJSON, name, firstBytes(data))}
		}
		rewards[name] = f
		names = append(names, name)
	}
	if r, ok := rewards["reward"]; ok {
		return r, rewards, nil
	}
	sort.Strings(names)
	sum := 0.0
	for _, n := range names {
		sum += rewards[n]
	}
	return sum / float64(len(names)), rewards, nil
}

func parseRewardTxt(data []byte) (float64, map[string]float64, error) {
	s := strings.TrimSpace(string(data))
	if s == "" {
		return 0, nil, &rewardError{rewardTxt + " is empty"}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, nil, &rewardError{fmt.Sprintf("%s does not hold one number: %s", rewardTxt, firstBytes(data))}
	}
	return f, map[string]float64{"reward": f}, nil
}

// firstBytes quotes the start of a file for an error message.
func firstBytes(data []byte) string {
	const n = 80
	if len(data) > n {
		return strconv.Quote(string(data[:n])) + "..."
	}
	return strconv.Quote(string(data))
}
