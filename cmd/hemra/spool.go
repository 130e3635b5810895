package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"slices"
)

// spoolMemory is how much a spool keeps in memory before it moves what
// it holds to a temporary file.
const spoolMemory = 1 << 20

// spool holds what a reader gathers inside a read transaction, to be
// written out after it: a reader that printed while it read would hold
// state.db's shared lock for as long as the reader of its output (a
// pager, a slow pipe) takes, and an apply would wait for it. It keeps up
// to spoolMemory in memory, then moves to a temporary file (deleted at
// once), so what it holds costs no memory whatever its size.
type spool struct {
	mem []byte
	f   *os.File
	w   *bufio.Writer // into f
	err error
}

func (s *spool) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.f == nil && len(s.mem)+len(p) <= spoolMemory {
		if s.mem == nil {
			s.mem = make([]byte, 0, spoolMemory) // grown by append, it would be copied at every doubling
		}
		s.mem = append(s.mem, p...)
		return len(p), nil
	}
	if s.f == nil {
		f, err := os.CreateTemp("", "hemra-spool-*")
		if err != nil {
			s.err = err
			return 0, err
		}
		_ = os.Remove(f.Name())
		s.f, s.w = f, bufio.NewWriterSize(f, 256<<10)
		if _, err := s.w.Write(s.mem); err != nil {
			s.err = err
			return 0, err
		}
		s.mem = nil
	}
	n, err := s.w.Write(p)
	if err != nil {
		s.err = err
	}
	return n, err
}

// reader reads what the spool holds, from the start.
func (s *spool) reader() (io.Reader, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.f == nil {
		return &byteReader{b: s.mem}, nil
	}
	if err := s.w.Flush(); err != nil {
		return nil, err
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return bufio.NewReaderSize(s.f, 256<<10), nil
}

func (s *spool) close() {
	if s.f != nil {
		s.f.Close()
	}
}

// byteReader is bytes.Reader with the io.ByteReader the rows' varints
// need, without copying.
type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) Read(p []byte) (int, error) {
	if r.i >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.i:])
	r.i += n
	return n, nil
}

func (r *byteReader) ReadByte() (byte, error) {
	if r.i >= len(r.b) {
		return 0, io.EOF
	}
	r.i++
	return r.b[r.i-1], nil
}

// rowSpool is a spool of rows of text cells: each cell its length as a
// varint, then its bytes; each row its number of cells first.
type rowSpool struct {
	spool
	buf []byte
}

func (s *rowSpool) add(cells ...string) error {
	s.buf = binary.AppendUvarint(s.buf[:0], uint64(len(cells)))
	for _, c := range cells {
		s.buf = binary.AppendUvarint(s.buf, uint64(len(c)))
		s.buf = append(s.buf, c...)
	}
	_, err := s.Write(s.buf)
	return err
}

// each calls fn with every row, in the order added. The cells are valid
// only during the call.
func (s *rowSpool) each(fn func(cells [][]byte) error) error {
	r, err := s.reader()
	if err != nil {
		return err
	}
	br := r.(interface {
		io.Reader
		io.ByteReader
	})
	var cells [][]byte
	var data []byte
	var ends []int
	for {
		n, err := binary.ReadUvarint(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		cells, data, ends = cells[:0], data[:0], ends[:0]
		for range n {
			size, err := binary.ReadUvarint(br)
			if err != nil {
				return err
			}
			start := len(data)
			data = slices.Grow(data, int(size))[:start+int(size)]
			if _, err := io.ReadFull(br, data[start:]); err != nil {
				return err
			}
			ends = append(ends, len(data))
		}
		start := 0
		for _, end := range ends {
			cells = append(cells, data[start:end])
			start = end
		}
		if err := fn(cells); err != nil {
			return err
		}
	}
}
