package dataset

import (
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"math"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"unsafe"
)

// The hash cache keeps a task.toml as the TaskConfig parsed from it, so a
// plan with nothing to do neither reads nor parses it (parsing is most of
// what loading a task costs once its files go unread). The encoding below
// is driven by reflection over TaskConfig's types, so a field added to
// them is carried without anything to remember here; a value it cannot
// carry exactly (a TOML date, say) makes the task.toml cached as its bytes
// and parsed as before.
//
// A cached parse is only as good as the parser that made it: the cache
// file records parseIdentity, a hash of the sources of the parser and of
// the types it fills (embedded below), of the constants it reads from the
// package's other files, of go-toml's version and of the Go release, and a
// cached parse made by any other build is not used.

//go:embed taskconfig.go task.go tomlpos.go configcodec.go
var parserSources embed.FS

var parseIdentity = sync.OnceValue(func() [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(runtime.Version() + "\x00"))
	// What the parser reads from the package's other files.
	h.Write(binary.AppendUvarint(nil, MaxTaskTOML))
	h.Write(utf8BOM)
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/pelletier/go-toml/v2" {
				h.Write([]byte(m.Path + "@" + m.Version + "\x00" + m.Sum + "\x00"))
			}
		}
	}
	for _, name := range []string{"taskconfig.go", "task.go", "tomlpos.go", "configcodec.go"} {
		data, err := parserSources.ReadFile(name)
		if err != nil {
			panic(err) // embedded above
		}
		h.Write([]byte(name + "\x00"))
		h.Write(data)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
})

// appendTaskConfig appends cfg's encoding to b. It reports false when cfg
// holds something the encoding does not carry, or when decoding it would
// not give back a value deeply equal to cfg: then nothing is cached.
func appendTaskConfig(b []byte, cfg *TaskConfig) ([]byte, bool) {
	start := len(b)
	b, ok := encodeValue(b, reflect.ValueOf(cfg).Elem())
	if !ok {
		return b[:start], false
	}
	back, ok := decodeTaskConfig(b[start:])
	if !ok || !reflect.DeepEqual(back, cfg) {
		return b[:start], false
	}
	return b, true
}

// decodeTaskConfig decodes what appendTaskConfig encoded. Its strings
// share one copy of the encoding, never the caller's buffer.
func decodeTaskConfig(enc []byte) (*TaskConfig, bool) {
	own := slices.Clone(enc)
	d := &valueDecoder{b: own}
	cfg := new(TaskConfig)
	d.value(reflect.ValueOf(cfg).Elem())
	if d.fail || d.p != len(d.b) {
		return nil, false
	}
	return cfg, true
}

// Tags of the dynamic types an `any` of a decoded TOML document holds.
const (
	anyNil = iota
	anyString
	anyInt64
	anyFloat64
	anyBool
	anyList
	anyTable
)

var (
	anyListType  = reflect.TypeFor[[]any]()
	anyTableType = reflect.TypeFor[map[string]any]()
)

// encodeValue encodes v by its type: a struct as its non-zero fields (index
// and value, ended by 0), a pointer, slice or map with a presence mark (nil
// is kept apart from empty), numbers exactly (a float's bits).
func encodeValue(b []byte, v reflect.Value) ([]byte, bool) {
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				return b, false
			}
			f := v.Field(i)
			if isZeroExact(f) {
				continue
			}
			b = binary.AppendUvarint(b, uint64(i+1))
			var ok bool
			if b, ok = encodeValue(b, f); !ok {
				return b, false
			}
		}
		return binary.AppendUvarint(b, 0), true
	case reflect.Pointer:
		if v.IsNil() {
			return append(b, 0), true
		}
		return encodeValue(append(b, 1), v.Elem())
	case reflect.Slice:
		if v.IsNil() {
			return append(b, 0), true
		}
		b = binary.AppendUvarint(b, uint64(v.Len())+1)
		for i := range v.Len() {
			var ok bool
			if b, ok = encodeValue(b, v.Index(i)); !ok {
				return b, false
			}
		}
		return b, true
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return b, false
		}
		if v.IsNil() {
			return append(b, 0), true
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(x, y reflect.Value) int {
			if x.String() < y.String() {
				return -1
			}
			return 1
		})
		b = binary.AppendUvarint(b, uint64(len(keys))+1)
		for _, k := range keys {
			b = appendString(b, k.String())
			var ok bool
			if b, ok = encodeValue(b, v.MapIndex(k)); !ok {
				return b, false
			}
		}
		return b, true
	case reflect.Interface:
		if v.IsNil() {
			return append(b, anyNil), true
		}
		e := v.Elem()
		switch e.Type() {
		case reflect.TypeFor[string]():
			return appendString(append(b, anyString), e.String()), true
		case reflect.TypeFor[int64]():
			return binary.AppendVarint(append(b, anyInt64), e.Int()), true
		case reflect.TypeFor[float64]():
			return binary.LittleEndian.AppendUint64(append(b, anyFloat64), math.Float64bits(e.Float())), true
		case reflect.TypeFor[bool]():
			return append(b, anyBool, boolByte(e.Bool())), true
		case anyListType:
			return encodeValue(append(b, anyList), e)
		case anyTableType:
			return encodeValue(append(b, anyTable), e)
		}
		return b, false // dates and times, among others
	case reflect.String:
		return appendString(b, v.String()), true
	case reflect.Bool:
		return append(b, boolByte(v.Bool())), true
	case reflect.Int, reflect.Int64, reflect.Int32:
		return binary.AppendVarint(b, v.Int()), true
	case reflect.Uint32, reflect.Uint64:
		return binary.AppendUvarint(b, v.Uint()), true
	case reflect.Float64:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Float())), true
	}
	return b, false
}

// isZeroExact reports whether a struct field may be left out: its decoded
// zero value is the same bits (a float's -0 is not left out).
func isZeroExact(v reflect.Value) bool {
	if v.Kind() == reflect.Float64 {
		return math.Float64bits(v.Float()) == 0
	}
	if v.Kind() == reflect.Struct {
		return false // encoded field by field
	}
	return v.IsZero()
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func boolByte(x bool) byte {
	if x {
		return 1
	}
	return 0
}

// valueDecoder reads encodeValue's form into settable values. Strings
// alias b, which the caller owns and never writes.
type valueDecoder struct {
	b    []byte
	p    int
	fail bool
}

func (d *valueDecoder) uv() uint64 {
	v, n := binary.Uvarint(d.b[d.p:])
	if n <= 0 {
		d.fail = true
		return 0
	}
	d.p += n
	return v
}

func (d *valueDecoder) sv() int64 {
	v, n := binary.Varint(d.b[d.p:])
	if n <= 0 {
		d.fail = true
		return 0
	}
	d.p += n
	return v
}

func (d *valueDecoder) byte() byte {
	if d.p >= len(d.b) {
		d.fail = true
		return 0
	}
	d.p++
	return d.b[d.p-1]
}

func (d *valueDecoder) f64() float64 {
	if len(d.b)-d.p < 8 {
		d.fail = true
		return 0
	}
	d.p += 8
	return math.Float64frombits(binary.LittleEndian.Uint64(d.b[d.p-8:]))
}

func (d *valueDecoder) str() string {
	n := d.uv()
	if d.fail || n > uint64(len(d.b)-d.p) {
		d.fail = true
		return ""
	}
	if n == 0 {
		return ""
	}
	s := unsafe.String(&d.b[d.p], int(n))
	d.p += int(n)
	return s
}

// count reads a slice's or map's presence mark and length: -1 for nil.
// A length is bounded by the bytes left (every element takes one).
func (d *valueDecoder) count() int {
	n := d.uv()
	if d.fail || n > uint64(len(d.b)-d.p)+1 {
		d.fail = true
		return -1
	}
	return int(n) - 1
}

// The types a TaskConfig holds most, decoded without reflection.
var (
	stringsType   = reflect.TypeFor[[]string]()
	stringMapType = reflect.TypeFor[map[string]string]()
)

func (d *valueDecoder) value(v reflect.Value) {
	if d.fail {
		return
	}
	switch v.Type() {
	case anyTableType:
		if m := d.table(); !d.fail {
			v.Set(reflect.ValueOf(m))
		}
		return
	case stringsType:
		n := d.count()
		if n < 0 {
			return
		}
		l := make([]string, n)
		for i := range l {
			l[i] = d.str()
		}
		v.Set(reflect.ValueOf(l))
		return
	case stringMapType:
		n := d.count()
		if n < 0 {
			return
		}
		m := make(map[string]string, n)
		for range n {
			k := d.str()
			m[k] = d.str()
		}
		v.Set(reflect.ValueOf(m))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		last := 0
		for {
			i := d.uv()
			if d.fail || i == 0 {
				return
			}
			if i <= uint64(last) || i > uint64(v.NumField()) {
				d.fail = true
				return
			}
			last = int(i)
			d.value(v.Field(last - 1))
		}
	case reflect.Pointer:
		switch d.byte() {
		case 0:
		case 1:
			p := reflect.New(v.Type().Elem())
			d.value(p.Elem())
			v.Set(p)
		default:
			d.fail = true
		}
	case reflect.Slice:
		n := d.count()
		if n < 0 {
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			d.value(s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		n := d.count()
		if n < 0 {
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), n)
		elem := v.Type().Elem()
		for range n {
			k := d.str()
			e := reflect.New(elem).Elem()
			d.value(e)
			if d.fail {
				return
			}
			m.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.Interface:
		if x := d.any(); x != nil && !d.fail {
			v.Set(reflect.ValueOf(x))
		}
	case reflect.String:
		v.SetString(d.str())
	case reflect.Bool:
		v.SetBool(d.bool())
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(d.sv())
	case reflect.Uint32, reflect.Uint64:
		v.SetUint(d.uv())
	case reflect.Float64:
		v.SetFloat(d.f64())
	default:
		d.fail = true
	}
}

func (d *valueDecoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail = true
	return false
}

// any decodes one tagged value of a TOML document.
func (d *valueDecoder) any() any {
	switch d.byte() {
	case anyNil:
		return nil
	case anyString:
		return d.str()
	case anyInt64:
		return d.sv()
	case anyFloat64:
		return d.f64()
	case anyBool:
		return d.bool()
	case anyList:
		n := d.count()
		if n < 0 {
			return []any(nil)
		}
		l := make([]any, n)
		for i := range l {
			l[i] = d.any()
		}
		return l
	case anyTable:
		return d.table()
	}
	d.fail = true
	return nil
}

func (d *valueDecoder) table() map[string]any {
	n := d.count()
	if n < 0 {
		return nil
	}
	m := make(map[string]any, n)
	for range n {
		k := d.str()
		m[k] = d.any()
	}
	return m
}
