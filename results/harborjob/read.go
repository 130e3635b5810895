package harborjob

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// Limits bound what ReadJob reads of a job folder someone else wrote.
type Limits struct {
	MaxJSONBytes  int64 // a result.json or config.json; default 16 MiB
	MaxFileBytes  int64 // any other file listed; default 64 MiB
	MaxTrialBytes int64 // all files of one trial; default 512 MiB
	MaxTrialFiles int   // files of one trial; default 10,000
}

func (l Limits) withDefaults() Limits {
	if l.MaxJSONBytes == 0 {
		l.MaxJSONBytes = 16 << 20
	}
	if l.MaxFileBytes == 0 {
		l.MaxFileBytes = 64 << 20
	}
	if l.MaxTrialBytes == 0 {
		l.MaxTrialBytes = 512 << 20
	}
	if l.MaxTrialFiles == 0 {
		l.MaxTrialFiles = 10000
	}
	return l
}

// Diagnostic is a file of the job that was not read, and why.
type Diagnostic struct {
	Path    string // relative to the job folder
	Problem string
}

func (d Diagnostic) String() string { return d.Path + ": " + d.Problem }

// File is a regular file of a trial folder.
type File struct {
	Rel  string // slash-separated, relative to the trial folder
	Size int64
}

// Trial is one trial folder of a job.
type Trial struct {
	Name   string // the folder's name (Harbor's trial_name)
	Dir    string
	Result TrialResult
	Files  []File
}

// Job is a Harbor job folder as read.
type Job struct {
	Dir       string
	Name      string          // the folder's name (Harbor's job_name)
	Result    *JobResult      // nil when result.json is missing or unreadable
	Config    *JobConfig      // nil likewise for config.json
	ConfigRaw json.RawMessage // config.json as written
	Trials    []*Trial        // in folder-name order
	// Diagnostics are the files that were not read: unreadable, too large,
	// or symbolic links (never followed).
	Diagnostics []Diagnostic
}

// ReadJob reads the Harbor job folder dir: its result.json and config.json
// and every trial folder (a subfolder whose result.json has a task_name),
// listing each trial's files. Symbolic links are never followed; a file
// that cannot be read is a Diagnostic and the rest is read. It fails only
// when dir is not a folder, or holds no trial.
func ReadJob(dir string, lim Limits) (*Job, error) {
	lim = lim.withDefaults()
	st, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s is a symbolic link: give the job folder itself (links are never followed)", dir)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a folder: give a Harbor job folder (jobs/<job_name>/)", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	j := &Job{Dir: abs, Name: filepath.Base(abs)}
	diag := func(rel, format string, args ...any) {
		j.Diagnostics = append(j.Diagnostics, Diagnostic{Path: filepath.ToSlash(rel), Problem: fmt.Sprintf(format, args...)})
	}

	if raw, err := readJSONFile(filepath.Join(abs, "result.json"), lim.MaxJSONBytes); err == nil {
		var head struct {
			TaskName *string `json:"task_name"`
		}
		if json.Unmarshal(raw, &head) == nil && head.TaskName != nil {
			return nil, fmt.Errorf("%s is a trial folder (its result.json is a trial's): give the job folder above it", dir)
		}
		var r JobResult
		if err := json.Unmarshal(raw, &r); err != nil {
			diag("result.json", "not a Harbor job result: %v", err)
		} else {
			j.Result = &r
		}
	} else {
		diag("result.json", "%v", plainErr(err))
	}
	if raw, err := readJSONFile(filepath.Join(abs, "config.json"), lim.MaxJSONBytes); err == nil {
		var c JobConfig
		if err := json.Unmarshal(raw, &c); err != nil {
			diag("config.json", "not a Harbor job config: %v", err)
		} else {
			j.Config, j.ConfigRaw = &c, raw
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		diag("config.json", "%v", plainErr(err))
	}

	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			diag(name, "symbolic link, not followed")
			continue
		case !e.IsDir():
			continue
		}
		raw, err := readJSONFile(filepath.Join(abs, name, "result.json"), lim.MaxJSONBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue // not a trial folder
		}
		if err != nil {
			diag(name+"/result.json", "%v", plainErr(err))
			continue
		}
		var tr TrialResult
		if err := json.Unmarshal(raw, &tr); err != nil {
			diag(name+"/result.json", "not a Harbor trial result: %v", err)
			continue
		}
		if tr.TaskName == "" {
			diag(name+"/result.json", "no task_name: not a Harbor trial result")
			continue
		}
		if tr.TrialName == "" {
			tr.TrialName = name
		}
		t := &Trial{Name: name, Dir: filepath.Join(abs, name), Result: tr}
		listFiles(t, lim, func(rel, problem string) { diag(name+"/"+rel, "%s", problem) })
		j.Trials = append(j.Trials, t)
	}
	sort.Slice(j.Trials, func(a, b int) bool { return j.Trials[a].Name < j.Trials[b].Name })
	if len(j.Trials) == 0 {
		msg := fmt.Sprintf("%s holds no Harbor trial folder (a subfolder with a result.json that has a task_name)", dir)
		for _, d := range j.Diagnostics {
			msg += "\n  " + d.String()
		}
		return nil, errors.New(msg)
	}
	return j, nil
}

// listFiles lists the regular files of a trial folder, within the limits.
func listFiles(t *Trial, lim Limits, diag func(rel, problem string)) {
	var total int64
	_ = filepath.WalkDir(t.Dir, func(path string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(t.Dir, path)
		rel = filepath.ToSlash(rel)
		if err != nil {
			diag(rel, plainErr(err).Error())
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			diag(rel, "symbolic link, not followed")
			return nil
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			diag(rel, "not a regular file, skipped")
			return nil
		}
		info, err := d.Info()
		if err != nil {
			diag(rel, plainErr(err).Error())
			return nil
		}
		switch {
		case len(t.Files) >= lim.MaxTrialFiles:
			diag(rel, fmt.Sprintf("skipped: the trial has more than %d files", lim.MaxTrialFiles))
			return fs.SkipAll
		case info.Size() > lim.MaxFileBytes:
			diag(rel, fmt.Sprintf("skipped: %d bytes, more than the %d a file may have", info.Size(), lim.MaxFileBytes))
			return nil
		case total+info.Size() > lim.MaxTrialBytes:
			diag(rel, fmt.Sprintf("skipped: the trial's files pass %d bytes", lim.MaxTrialBytes))
			return nil
		}
		total += info.Size()
		t.Files = append(t.Files, File{Rel: rel, Size: info.Size()})
		return nil
	})
}

// OpenFile opens a regular file without following a symbolic link at its
// last element: a job folder can hold agent-written files.
func OpenFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, nil
}

func readJSONFile(path string, max int64) ([]byte, error) {
	f, err := OpenFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return b, nil
}

// plainErr drops the path an *fs.PathError repeats: diagnostics name the
// file already.
func plainErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if errors.Is(pe.Err, syscall.ELOOP) {
			return errors.New("symbolic link, not followed")
		}
		return pe.Err
	}
	return err
}
