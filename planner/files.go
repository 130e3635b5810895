package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"unicode/utf8"
)

// maxTreeFiles bounds how many files one mounted folder may hold: a mount
// of a huge folder is almost always a mistake (and would make every plan
// slow), so it is an error naming the folder.
const maxTreeFiles = 50000

// treeFile is one file of a hashed folder (or the file itself, rel "").
type treeFile struct {
	rel  string // slash-separated, relative to the folder; "" for a single file
	sha  string // hex
	size int64
	text bool // small valid UTF-8: kept as a blob for diffs
}

// tree hashes a file or every regular file under a folder, once per plan.
// Symbolic links are recorded by their target, never followed; .git and
// the store folder are skipped.
func (p *planner) tree(full string) ([]treeFile, error) {
	if files, ok := p.trees[full]; ok {
		return files, nil
	}
	st, err := os.Lstat(full)
	if err != nil {
		return nil, pathError(err)
	}
	var files []treeFile
	if !st.IsDir() {
		f, err := hashFile(full, st)
		if err != nil {
			return nil, err
		}
		files = []treeFile{f}
	} else {
		err = filepath.WalkDir(full, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != full && (d.Name() == ".git" || (p.opts.StoreDir != "" && path == p.opts.StoreDir)) {
					return filepath.SkipDir
				}
				return nil
			}
			if len(files) >= maxTreeFiles {
				return fmt.Errorf("more than %d files; mount a smaller folder", maxTreeFiles)
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			f, err := hashFile(path, info)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(full, path)
			f.rel = filepath.ToSlash(rel)
			files = append(files, f)
			return nil
		})
		if err != nil {
			return nil, pathError(err)
		}
		sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	}
	p.trees[full] = files
	return files, nil
}

func hashFile(path string, info fs.FileInfo) (treeFile, error) {
	if info.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(path)
		if err != nil {
			return treeFile{}, err
		}
		sum := sha256.Sum256([]byte("symlink:" + target))
		return treeFile{sha: hex.EncodeToString(sum[:]), size: int64(len(target))}, nil
	}
	if !info.Mode().IsRegular() {
		sum := sha256.Sum256([]byte("special:" + info.Mode().Type().String()))
		return treeFile{sha: hex.EncodeToString(sum[:])}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return treeFile{}, err
	}
	defer f.Close()
	h := sha256.New()
	var head []byte
	if info.Size() < maxTextBlob {
		head, err = io.ReadAll(f)
		if err != nil {
			return treeFile{}, err
		}
		h.Write(head)
	} else if _, err := io.Copy(h, f); err != nil {
		return treeFile{}, err
	}
	return treeFile{
		sha:  hex.EncodeToString(h.Sum(nil)),
		size: info.Size(),
		text: head != nil && utf8.Valid(head),
	}, nil
}

// pathError drops the absolute path from an fs error: diagnostics name
// the path relative to the eval directory themselves.
func pathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
