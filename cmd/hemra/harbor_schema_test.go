package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// A check of JSON against Harbor's pydantic models, written from their
// source at eb165d99 (fields, types, which are required): what Harbor's
// TrialResult.model_validate_json and JobResult.model_validate_json would
// accept of the files hemra export -format harbor writes.
//
//	src/harbor/models/trial/result.py  TrialResult, TimingInfo, ExceptionInfo, AgentInfo, ModelInfo, StepResult
//	src/harbor/models/agent/context.py AgentContext
//	src/harbor/models/verifier/result.py VerifierResult
//	src/harbor/models/trial/config.py  TrialConfig, TaskConfig, AgentConfig, EnvironmentConfig, VerifierConfig
//	src/harbor/models/task/id.py       LocalTaskId, GitTaskId, PackageTaskId
//	src/harbor/models/job/result.py    JobResult, JobStats, AgentDatasetStats

// kind is a JSON type as pydantic coerces it (strict enough: a string
// where a number is expected fails, as it does in Harbor for non-numeric
// strings).
type kind string

const (
	kStr      kind = "str"
	kInt      kind = "int"
	kNum      kind = "float"
	kBool     kind = "bool"
	kTime     kind = "datetime"
	kUUID     kind = "UUID"
	kObj      kind = "object"
	kList     kind = "list"
	kAny      kind = "any"
	kMapNum   kind = "dict[str, float|int]"
	kMapAny   kind = "dict[str, Any]"
	kMapStr   kind = "dict[str, str]"
	kMapObj   kind = "dict[str, model]"
	kListStr  kind = "list[str]"
	kListObj  kind = "list[model]"
	kTaskID   kind = "LocalTaskId|GitTaskId|PackageTaskId"
	kMapIntNm kind = "dict[int, float]"
	kRewardSt kind = "dict[str, dict[float|int, list[str]]]"
	kExcSt    kind = "dict[str, list[str]]"
)

type field struct {
	name     string
	kind     kind
	required bool // no default in the model
	nullable bool // `X | None`
	sub      []field
	// open objects may hold fields this check does not list (the models'
	// settings hemra never writes); every other object holds only these.
	open bool
}

var timingInfo = []field{{name: "started_at", kind: kTime, nullable: true}, {name: "finished_at", kind: kTime, nullable: true}}

var exceptionInfo = []field{
	{name: "exception_type", kind: kStr, required: true}, {name: "exception_message", kind: kStr, required: true},
	{name: "exception_traceback", kind: kStr, required: true}, {name: "occurred_at", kind: kTime, required: true},
}

var agentContext = []field{
	{name: "n_input_tokens", kind: kInt, nullable: true}, {name: "n_cache_tokens", kind: kInt, nullable: true},
	{name: "n_output_tokens", kind: kInt, nullable: true}, {name: "cost_usd", kind: kNum, nullable: true},
	{name: "rollout_details", kind: kList, nullable: true}, {name: "metadata", kind: kMapAny, nullable: true},
}

var verifierResult = []field{{name: "rewards", kind: kMapNum, nullable: true}}

var trialConfig = []field{
	{name: "task", kind: kObj, open: true, required: true, sub: []field{
		{name: "path", kind: kStr, nullable: true}, {name: "git_url", kind: kStr, nullable: true},
		{name: "git_commit_id", kind: kStr, nullable: true}, {name: "name", kind: kStr, nullable: true},
		{name: "ref", kind: kStr, nullable: true}, {name: "overwrite", kind: kBool},
		{name: "download_dir", kind: kStr, nullable: true}, {name: "source", kind: kStr, nullable: true},
	}},
	{name: "trial_name", kind: kStr}, {name: "trials_dir", kind: kStr}, {name: "timeout_multiplier", kind: kNum},
	{name: "agent", kind: kObj, open: true, sub: []field{
		{name: "name", kind: kStr, nullable: true}, {name: "import_path", kind: kStr, nullable: true},
		{name: "model_name", kind: kStr, nullable: true}, {name: "override_timeout_sec", kind: kNum, nullable: true},
		{name: "override_setup_timeout_sec", kind: kNum, nullable: true}, {name: "max_timeout_sec", kind: kNum, nullable: true},
		{name: "kwargs", kind: kMapAny}, {name: "env", kind: kMapStr},
	}},
	{name: "environment", kind: kObj, open: true, sub: []field{
		{name: "type", kind: kStr, nullable: true}, {name: "import_path", kind: kStr, nullable: true},
		{name: "force_build", kind: kBool}, {name: "delete", kind: kBool}, {name: "env", kind: kMapStr}, {name: "kwargs", kind: kMapAny},
	}},
	{name: "verifier", kind: kObj, open: true, sub: []field{
		{name: "override_timeout_sec", kind: kNum, nullable: true}, {name: "max_timeout_sec", kind: kNum, nullable: true},
		{name: "env", kind: kMapStr}, {name: "disable", kind: kBool},
	}},
	{name: "artifacts", kind: kList}, {name: "job_id", kind: kUUID, nullable: true},
}

var trialResultSchema = []field{
	{name: "id", kind: kUUID},
	{name: "task_name", kind: kStr, required: true},
	{name: "trial_name", kind: kStr, required: true},
	{name: "trial_uri", kind: kStr, required: true},
	{name: "task_id", kind: kTaskID, required: true},
	{name: "source", kind: kStr, nullable: true},
	{name: "task_checksum", kind: kStr, required: true},
	{name: "config", kind: kObj, required: true, sub: trialConfig, open: true},
	{name: "agent_info", kind: kObj, required: true, sub: []field{
		{name: "name", kind: kStr, required: true}, {name: "version", kind: kStr, required: true},
		{name: "model_info", kind: kObj, nullable: true, sub: []field{{name: "name", kind: kStr, required: true}, {name: "provider", kind: kStr, nullable: true}}},
	}},
	{name: "agent_result", kind: kObj, nullable: true, sub: agentContext},
	{name: "verifier_result", kind: kObj, nullable: true, sub: verifierResult},
	{name: "exception_info", kind: kObj, nullable: true, sub: exceptionInfo},
	{name: "started_at", kind: kTime, nullable: true},
	{name: "finished_at", kind: kTime, nullable: true},
	{name: "environment_setup", kind: kObj, nullable: true, sub: timingInfo},
	{name: "agent_setup", kind: kObj, nullable: true, sub: timingInfo},
	{name: "agent_execution", kind: kObj, nullable: true, sub: timingInfo},
	{name: "verifier", kind: kObj, nullable: true, sub: timingInfo},
	{name: "step_results", kind: kListObj, nullable: true},
}

var agentDatasetStats = []field{
	{name: "n_trials", kind: kInt}, {name: "n_errors", kind: kInt}, {name: "metrics", kind: kListObj},
	{name: "pass_at_k", kind: kMapIntNm}, {name: "reward_stats", kind: kRewardSt}, {name: "exception_stats", kind: kExcSt},
}

var jobResultSchema = []field{
	{name: "id", kind: kUUID, required: true},
	{name: "started_at", kind: kTime, required: true},
	{name: "updated_at", kind: kTime, nullable: true},
	{name: "finished_at", kind: kTime, nullable: true},
	{name: "n_total_trials", kind: kInt, required: true},
	{name: "stats", kind: kObj, required: true, sub: []field{
		{name: "n_completed_trials", kind: kInt}, {name: "n_errored_trials", kind: kInt}, {name: "n_running_trials", kind: kInt},
		{name: "n_pending_trials", kind: kInt}, {name: "n_cancelled_trials", kind: kInt}, {name: "n_retries", kind: kInt},
		{name: "evals", kind: kMapObj, sub: agentDatasetStats},
		{name: "n_input_tokens", kind: kInt, nullable: true}, {name: "n_cache_tokens", kind: kInt, nullable: true},
		{name: "n_output_tokens", kind: kInt, nullable: true}, {name: "cost_usd", kind: kNum, nullable: true},
	}},
	{name: "trial_results", kind: kListObj},
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

// checkSchema returns every way doc fails the model's fields.
func checkSchema(doc []byte, schema []field) []string {
	var v map[string]any
	d := json.NewDecoder(strings.NewReader(string(doc)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return []string{"not a JSON object: " + err.Error()}
	}
	var problems []string
	checkObject("", v, schema, false, &problems)
	sort.Strings(problems)
	return problems
}

func checkObject(at string, v map[string]any, schema []field, open bool, problems *[]string) {
	known := map[string]bool{}
	for _, f := range schema {
		known[f.name] = true
		x, ok := v[f.name]
		switch {
		case !ok && f.required:
			*problems = append(*problems, at+f.name+": required")
		case !ok:
		case x == nil && !f.nullable:
			*problems = append(*problems, at+f.name+": null, but the model's type is not optional")
		case x != nil:
			checkValue(at+f.name, x, f, problems)
		}
	}
	for k := range v {
		if !known[k] && !open {
			*problems = append(*problems, at+k+": not a field of the model")
		}
	}
}

func checkValue(at string, x any, f field, problems *[]string) {
	bad := func(format string, args ...any) { *problems = append(*problems, at+": "+fmt.Sprintf(format, args...)) }
	isInt := func(x any) bool {
		n, ok := x.(json.Number)
		_, err := n.Int64()
		return ok && err == nil
	}
	isNum := func(x any) bool { n, ok := x.(json.Number); _, err := n.Float64(); return ok && err == nil }
	isStr := func(x any) bool { _, ok := x.(string); return ok }
	switch f.kind {
	case kStr:
		if !isStr(x) {
			bad("want a string, got %v", x)
		}
	case kInt:
		if !isInt(x) {
			bad("want an integer, got %v", x)
		}
	case kNum:
		if !isNum(x) {
			bad("want a number, got %v", x)
		}
	case kBool:
		if _, ok := x.(bool); !ok {
			bad("want a boolean, got %v", x)
		}
	case kTime:
		s, ok := x.(string)
		if !ok {
			bad("want a datetime string, got %v", x)
		} else if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			bad("%q is not an ISO 8601 datetime", s)
		}
	case kUUID:
		if s, ok := x.(string); !ok || !uuidRE.MatchString(s) {
			bad("want a UUID, got %v", x)
		}
	case kObj:
		m, ok := x.(map[string]any)
		if !ok {
			bad("want an object, got %v", x)
			return
		}
		checkObject(at+".", m, f.sub, f.open, problems)
	case kList, kListObj, kListStr:
		l, ok := x.([]any)
		if !ok {
			bad("want a list, got %v", x)
			return
		}
		for i, e := range l {
			switch {
			case f.kind == kListStr && !isStr(e):
				bad("[%d] want a string", i)
			case f.kind == kListObj:
				if _, ok := e.(map[string]any); !ok {
					bad("[%d] want an object", i)
				}
			}
		}
	case kMapNum, kMapStr, kMapAny, kMapObj, kMapIntNm, kRewardSt, kExcSt:
		m, ok := x.(map[string]any)
		if !ok {
			bad("want an object, got %v", x)
			return
		}
		for k, e := range m {
			switch f.kind {
			case kMapNum:
				if !isNum(e) {
					bad("[%s] want a number", k)
				}
			case kMapStr:
				if !isStr(e) {
					bad("[%s] want a string", k)
				}
			case kMapObj:
				if o, ok := e.(map[string]any); !ok {
					bad("[%s] want an object", k)
				} else {
					checkObject(at+"."+k+".", o, f.sub, false, problems)
				}
			case kMapIntNm:
				if _, err := json.Number(k).Int64(); err != nil || !isNum(e) {
					bad("[%s] want an integer key and a number", k)
				}
			case kRewardSt:
				inner, ok := e.(map[string]any)
				if !ok {
					bad("[%s] want an object", k)
					continue
				}
				for val, names := range inner {
					if _, err := json.Number(val).Float64(); err != nil {
						bad("[%s][%s] want a numeric key", k, val)
					}
					checkValue(at+"."+k+"."+val, names, field{kind: kListStr}, problems)
				}
			case kExcSt:
				checkValue(at+"."+k, e, field{kind: kListStr}, problems)
			}
		}
	case kTaskID:
		m, ok := x.(map[string]any)
		switch {
		case !ok:
			bad("want a task id object")
		case isStr(m["org"]) && isStr(m["name"]):
		case isStr(m["path"]):
		default:
			bad("want {path} (LocalTaskId), {git_url, path} (GitTaskId) or {org, name} (PackageTaskId), got %v", x)
		}
	}
}
