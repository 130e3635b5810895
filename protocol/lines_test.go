package protocol

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(t testing.TB, in string, max int) ([]string, error) {
	// OneByteReader: lines arrive in the smallest pieces a pipe can give.
	lr := newLineReader(iotest.OneByteReader(strings.NewReader(in)), max)
	var got []string
	for {
		line, err := lr.next()
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, string(line))
	}
}

func TestLineReader(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want []string
		err  bool
	}{
		{"a\nbb\n", 10, []string{"a", "bb"}, false},
		{"a\r\nbb\r\n", 10, []string{"a", "bb"}, false},
		{"last line without newline", 100, []string{"last line without newline"}, false},
		{"\n\n", 10, []string{"", ""}, false},
		{"exactly10!\nnext\n", 10, []string{"exactly10!", "next"}, false},
		{"ok\neleven12345\n", 10, []string{"ok"}, true},
		{"ok\n" + strings.Repeat("x", 1000), 10, []string{"ok"}, true},
	} {
		got, err := readAll(t, tc.in, tc.max)
		var tooLong *lineTooLongError
		if tc.err != errors.As(err, &tooLong) || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%q (max %d): got %q, %v", tc.in, tc.max, got, err)
		}
	}
}

// A line over the limit costs the limit in memory, not the line's length.
func TestLineReaderStopsAtTheLimit(t *testing.T) {
	endless := io.MultiReader(strings.NewReader("{"), infiniteX{})
	lr := newLineReader(endless, 1<<20)
	_, err := lr.next()
	var tooLong *lineTooLongError
	if !errors.As(err, &tooLong) || err.Error() != "line longer than the 1 MiB limit" {
		t.Fatalf("error %v", err)
	}
}

type infiniteX struct{}

func (infiniteX) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 16}
	for i := 0; i < 10; i++ {
		tb.Write([]byte("line " + string(rune('0'+i)) + "\n"))
	}
	if got := tb.String(); got != "line 8\nline 9\n" {
		t.Errorf("tail %q", got)
	}
	if got := tb.lastLine(100); got != "line 9" {
		t.Errorf("last line %q", got)
	}
	big := &tailBuffer{max: 4}
	big.Write(bytes.Repeat([]byte("ab"), 100))
	if got := big.String(); got != "abab" {
		t.Errorf("tail of one big write %q", got)
	}
}

func FuzzLineReader(f *testing.F) {
	f.Add("a\nb\r\n\nccc", 4)
	f.Fuzz(func(t *testing.T, in string, max int) {
		if max < 1 || max > 64 {
			return
		}
		got, err := readAll(t, in, max)
		want := strings.Split(in, "\n")
		if want[len(want)-1] == "" {
			want = want[:len(want)-1]
		}
		for i, w := range want {
			w = strings.TrimSuffix(w, "\r")
			if len(strings.Split(in, "\n")[i]) > max {
				var tooLong *lineTooLongError
				if !errors.As(err, &tooLong) || len(got) != i {
					t.Fatalf("line %d over %d: got %q, %v", i, max, got, err)
				}
				return
			}
			if i >= len(got) || got[i] != w {
				t.Fatalf("line %d: got %q want %q", i, got, want)
			}
		}
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
	})
}
