package dataset

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// HashCache remembers, like git's index, the SHA-256 of every task file
// with the file's size, mtime, ctime, inode, device and mode, and the
// entries of every task folder with the folder's own stat. A later load
// whose stat of a file matches reuses the recorded hash and reads nothing;
// a folder whose stat matches is not listed again. The small files a task
// keeps (instruction.md, environment/Dockerfile) are recorded with their
// bytes, and task.toml as the TaskConfig parsed from it (configcodec.go),
// so a no-op load opens no task file at all and parses none.
//
// The cache is an optimisation only: hashes and contents always equal what
// reading the files would give. Anything that does not match exactly is
// read again: a changed stat; an entry modified at or after the moment the
// cache file was written, or less than racyWindow before it was read
// ("racily clean", as git calls it); a corrupted or foreign cache file
// (ignored as a whole). Only Linux uses it (ctime and inode through
// fstatat); elsewhere every file is read.
//
// One HashCache is opened per command, shared by every dataset it loads,
// and saved once at the end (Save writes only when something changed, and
// ends the cache's use: it drops its memory). Nothing a load returns
// aliases the cache's memory.
type HashCache struct {
	path string
	// racy is the cache file's mtime when it was opened: entries modified
	// at or after it may have changed again unseen in the same instant.
	racy int64

	data []byte // the cache file; decoded keys and contents alias it
	// parsedOK: the file's parsed task.toml files were made by this
	// build's parser (parseIdentity); else they are not used.
	parsedOK bool
	groups   map[string]cacheGroup
	seen     []bool // per group: every entry still valid this run

	// loaded is closed once the file is read and indexed: OpenHashCache
	// does that in the background while the command parses its config.
	// nil: nothing to wait for.
	loaded chan struct{}

	mu sync.Mutex
	// fresh holds the groups encoded from what was read this run, by
	// root (two datasets over one folder record it once).
	fresh map[string][]byte
}

// cacheGroup locates one task folder's entries in data.
type cacheGroup struct {
	idx        int32 // in seen
	start, end int   // the whole group's bytes
	body       int   // where its entries start
	n          int   // entry count
}

// fileStat is what a cache entry must match.
type fileStat struct {
	size, mtime, ctime int64
	ino, dev           uint64
	mode               uint32
}

const (
	kindFile = 1
	kindDir  = 2
)

// cacheEntry is one file or folder of a task, rel to its folder ("" for
// the folder itself).
type cacheEntry struct {
	rel  string
	kind byte
	st   fileStat
	sha  [sha256.Size]byte
	// content is a kept file's bytes (hasData: recorded, maybe empty).
	content []byte
	hasData bool
	// parsed is a task.toml's TaskConfig (appendTaskConfig) recorded
	// instead of its bytes.
	parsed []byte
	// dir lists a folder's entries.
	dir []dirEntry
}

// cacheMagic opens every cache file, followed by the parseIdentity of the
// build that wrote it. v1 files (no parsed task.toml files) are foreign.
const cacheMagic = "hemra filehash v2\n"

// cacheHeader is the magic and the identity that follows it.
const cacheHeader = len(cacheMagic) + sha256.Size

// racyWindow: files modified less than this before a load began are not
// recorded, so a later edit in the same timestamp tick (filesystems keep
// coarse clocks) cannot hide behind an unchanged stat.
var racyWindow = 2 * time.Second

// maxCachedContent bounds the bytes of one kept file stored in the cache.
const maxCachedContent = 64 << 10

// maxCacheFile bounds the cache file read (1 GiB): a bigger one is not ours.
const maxCacheFile = 1 << 30

// OpenHashCache opens the cache file at path (typically
// <store>/cache/filehash.v1). A missing, unreadable, corrupted or foreign
// file gives an empty cache: the error is never fatal, the files are read.
func OpenHashCache(path string) *HashCache {
	c := &HashCache{path: path}
	if !cacheSupported {
		return c
	}
	f, err := os.Open(path)
	if err != nil {
		return c
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxCacheFile || fi.Size() < int64(cacheHeader+sha256.Size) {
		f.Close()
		return c
	}
	c.loaded = make(chan struct{})
	go func() {
		defer close(c.loaded)
		defer f.Close()
		data := make([]byte, fi.Size())
		if _, err := io.ReadFull(f, data); err != nil {
			return
		}
		groups, err := indexCache(data)
		if err != nil {
			return
		}
		c.racy = fi.ModTime().UnixNano()
		id := parseIdentity()
		c.parsedOK = bytes.Equal(data[len(cacheMagic):cacheHeader], id[:])
		c.data = data
		c.groups = groups
		c.seen = make([]bool, len(groups))
	}()
	return c
}

// wait waits for the background read OpenHashCache started.
func (c *HashCache) wait() {
	if c.loaded != nil {
		<-c.loaded
	}
}

// Len is the number of task folders the cache file recorded.
func (c *HashCache) Len() int {
	if c == nil {
		return 0
	}
	c.wait()
	return len(c.groups)
}

// group returns the recorded entries of the task folder root, sorted by
// rel, decoded into buf. Folder entries' names are copied out of the
// cache by intern.
func (c *HashCache) group(root string, buf []cacheEntry, intern func([]byte) string) (cacheGroup, []cacheEntry, bool) {
	if c == nil {
		return cacheGroup{}, nil, false
	}
	c.wait()
	if c.groups == nil {
		return cacheGroup{}, nil, false
	}
	g, ok := c.groups[root]
	if !ok {
		return cacheGroup{}, nil, false
	}
	d := decoder{valueDecoder: valueDecoder{b: c.data[:g.end], p: g.body}, parsedOK: c.parsedOK, intern: intern}
	buf = buf[:0]
	for i := range g.n {
		e := d.entry()
		if d.fail || (i > 0 && e.rel <= buf[i-1].rel) {
			return cacheGroup{}, nil, false
		}
		buf = append(buf, e)
	}
	if d.p != g.end {
		return cacheGroup{}, nil, false
	}
	return g, buf, true
}

// valid reports whether e still describes a file or folder of kind whose
// stat is st. An entry modified at or after the cache was written is never
// valid (racily clean).
func (c *HashCache) valid(e *cacheEntry, kind byte, st *fileStat) bool {
	return e.kind == kind && e.st == *st && e.st.mtime < c.racy && e.st.ctime < c.racy
}

// keep marks a group as still valid in full: Save copies it as it is.
func (c *HashCache) keep(g cacheGroup) { c.seen[g.idx] = true }

// add takes a group encoded from what a reader read.
func (c *HashCache) add(root string, group []byte) {
	c.mu.Lock()
	if c.fresh == nil {
		c.fresh = map[string][]byte{}
	}
	c.fresh[root] = group
	c.mu.Unlock()
}

// Changed reports whether Save would write: something was read from disk,
// or a recorded task folder was not seen valid in full.
func (c *HashCache) Changed() bool {
	if c == nil {
		return false
	}
	c.wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.fresh) > 0 {
		return true
	}
	return slices.Contains(c.seen, false)
}

// Save writes the cache when it changed: every task folder seen in this
// run (folders no longer loaded are dropped). It writes a temporary file
// beside the cache and renames it over, so a reader never sees half a
// file. The folder is created 0700.
func (c *HashCache) Save() error {
	if c == nil {
		return nil
	}
	defer c.release()
	if !cacheSupported || !c.Changed() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	size := cacheHeader + sha256.Size
	for _, g := range c.fresh {
		size += len(g)
	}
	var kept []cacheGroup
	for root, g := range c.groups {
		if _, dup := c.fresh[root]; !dup && c.seen[g.idx] {
			kept = append(kept, g)
			size += g.end - g.start
		}
	}
	slices.SortFunc(kept, func(a, b cacheGroup) int { return cmp.Compare(a.start, b.start) })
	data := make([]byte, 0, size)
	data = append(data, cacheMagic...)
	id := parseIdentity()
	data = append(data, id[:]...)
	// Kept groups hold only entries hit this run: a parsed task.toml
	// among them was made by this build (parsedOK), or it would have been
	// read again and its group encoded afresh.
	for _, g := range kept {
		data = append(data, c.data[g.start:g.end]...)
	}
	roots := slices.Sorted(maps.Keys(c.fresh))
	for _, root := range roots {
		data = append(data, c.fresh[root]...)
	}
	sum := sha256.Sum256(data)
	data = append(data, sum[:]...)

	dir := filepath.Dir(c.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("writing the file hash cache: %w", err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(c.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing the file hash cache: %w", err)
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), c.path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing the file hash cache: %w", werr)
	}
	return nil
}

// release drops what the cache holds (tens of MB for 100,000 files) so
// planning does not carry it: nothing loaded aliases it.
func (c *HashCache) release() {
	c.wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.data, c.groups, c.seen, c.fresh = nil, nil, nil, nil
}

// DropHashCache removes the cache file at path; a missing one is fine.
func DropHashCache(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// The file format: cacheMagic, the parseIdentity of the build that wrote
// it, then one group per task folder, then the SHA-256 of everything
// before it. A group is its root (the folder's
// absolute path), an entry count and the entries sorted by rel. An entry
// is rel, kind, size, mtime, ctime (varints), inode, device, mode
// (uvarints), then for a file its SHA-256 and a flag byte (1: its bytes
// follow; 2: the TaskConfig parsed from it follows, as bytes), for a folder its entry count and each entry's name and type.
// Strings are a uvarint length and the bytes.

// encodeGroup encodes one task folder's entries (sorted here).
func encodeGroup(root string, entries []cacheEntry) []byte {
	slices.SortFunc(entries, func(a, b cacheEntry) int { return cmp.Compare(a.rel, b.rel) })
	var b []byte
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for i := range entries {
		e := &entries[i]
		str(e.rel)
		b = append(b, e.kind)
		b = binary.AppendVarint(b, e.st.size)
		b = binary.AppendVarint(b, e.st.mtime)
		b = binary.AppendVarint(b, e.st.ctime)
		b = binary.AppendUvarint(b, e.st.ino)
		b = binary.AppendUvarint(b, e.st.dev)
		b = binary.AppendUvarint(b, uint64(e.st.mode))
		switch e.kind {
		case kindFile:
			b = append(b, e.sha[:]...)
			switch {
			case e.parsed != nil:
				b = append(b, 2)
				b = binary.AppendUvarint(b, uint64(len(e.parsed)))
				b = append(b, e.parsed...)
			case e.hasData:
				b = append(b, 1)
				b = binary.AppendUvarint(b, uint64(len(e.content)))
				b = append(b, e.content...)
			default:
				b = append(b, 0)
			}
		case kindDir:
			b = binary.AppendUvarint(b, uint64(len(e.dir)))
			for _, d := range e.dir {
				str(d.name)
				b = binary.AppendUvarint(b, uint64(d.typ))
			}
		}
	}
	out := binary.AppendUvarint(nil, uint64(len(root)))
	out = append(out, root...)
	out = binary.AppendUvarint(out, uint64(len(b)))
	return append(out, b...)
}

var errBadCache = errors.New("not a hemra file hash cache")

// indexCache checks a cache file (magic, checksum, every entry decodable)
// and indexes its groups by root.
func indexCache(data []byte) (map[string]cacheGroup, error) {
	if len(data) < cacheHeader+sha256.Size || !bytes.HasPrefix(data, []byte(cacheMagic)) {
		return nil, errBadCache
	}
	body := data[:len(data)-sha256.Size]
	// The checksum (tens of MB) is checked on another CPU while the
	// groups are indexed.
	sumOK := make(chan bool, 1)
	go func() {
		sum := sha256.Sum256(body)
		sumOK <- bytes.Equal(sum[:], data[len(body):])
	}()
	groups, err := indexGroups(body)
	if !<-sumOK {
		return nil, errBadCache
	}
	return groups, err
}

// indexGroups locates each task folder's group in body.
func indexGroups(body []byte) (map[string]cacheGroup, error) {
	groups := map[string]cacheGroup{}
	d := decoder{valueDecoder: valueDecoder{b: body, p: cacheHeader}}
	// Entries are decoded when their folder is loaded; one that does not
	// decode then is read from disk.
	for d.p < len(body) && !d.fail {
		start := d.p
		root := d.str()
		rest := d.bytes()
		if d.fail || root == "" {
			return nil, errBadCache
		}
		g := cacheGroup{idx: int32(len(groups)), start: start, end: d.p}
		gd := decoder{valueDecoder: valueDecoder{b: rest}}
		n := gd.uv()
		// An entry takes at least 10 bytes: a bigger count is corrupt.
		if gd.fail || n > uint64(len(rest))/10 {
			return nil, errBadCache
		}
		g.n = int(n)
		g.body = g.end - len(rest) + gd.p
		if _, dup := groups[root]; dup {
			return nil, errBadCache
		}
		groups[root] = g
	}
	if d.fail {
		return nil, errBadCache
	}
	return groups, nil
}

// decoder reads the cache format; strings alias b. Its varints and
// bytes are read as a parsed task.toml's are (valueDecoder). A parsed
// task.toml is dropped (the entry has no data: the file is read) unless
// parsedOK.
type decoder struct {
	valueDecoder
	parsedOK bool
	intern   func([]byte) string // copies a name out of b
}

func (d *decoder) bytes() []byte {
	n := d.uv()
	if d.fail || n > uint64(len(d.b)-d.p) {
		d.fail = true
		return nil
	}
	s := d.b[d.p : d.p+int(n) : d.p+int(n)]
	d.p += int(n)
	return s
}

// str aliases the cache bytes, which are never written after loading.
func (d *decoder) str() string {
	s := d.bytes()
	if len(s) == 0 {
		return ""
	}
	return unsafe.String(&s[0], len(s))
}

// name is a string copied out of b.
func (d *decoder) name() string {
	b := d.bytes()
	if d.intern != nil {
		return d.intern(b)
	}
	return string(b)
}

func (d *decoder) entry() cacheEntry {
	var e cacheEntry
	e.rel = d.str()
	e.kind = d.byte()
	e.st.size = d.sv()
	e.st.mtime = d.sv()
	e.st.ctime = d.sv()
	e.st.ino = d.uv()
	e.st.dev = d.uv()
	e.st.mode = uint32(d.uv())
	if d.fail {
		return e
	}
	switch e.kind {
	case kindFile:
		if len(d.b)-d.p < sha256.Size {
			d.fail = true
			return e
		}
		copy(e.sha[:], d.b[d.p:])
		d.p += sha256.Size
		switch d.byte() {
		case 0:
		case 1:
			e.content = d.bytes()
			e.hasData = true
		case 2:
			if p := d.bytes(); d.parsedOK && len(p) > 0 {
				e.parsed = p
			}
		default:
			d.fail = true
		}
	case kindDir:
		n := d.uv()
		if d.fail || n > uint64(len(d.b)-d.p)/2 {
			d.fail = true
			return e
		}
		e.dir = make([]dirEntry, 0, n)
		for range n {
			// Copied: a name becomes part of the task's file paths.
			name := d.name()
			typ := fs.FileMode(d.uv())
			if d.fail || name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
				d.fail = true
				return e
			}
			e.dir = append(e.dir, dirEntry{name: name, typ: typ})
		}
	default:
		d.fail = true
	}
	return e
}
