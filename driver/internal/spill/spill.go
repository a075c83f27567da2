package spill

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// recordOverhead is what one buffered record costs beyond its bytes (slice
// header); it is counted against the batch bound.
const recordOverhead = 24

// readBuffer is the per-run read buffer during a merge.
const readBuffer = 4096

// Sorter sorts records (byte strings compared with bytes.Compare). Memory is
// bounded by batchBytes plus fanIn read buffers plus one record per run,
// whatever the number of records.
type Sorter struct {
	dir        string
	batchBytes int
	fanIn      int
	maxRecord  int

	batch     [][]byte
	batchSize int
	runs      []string
	created   []string
	closed    bool
}

// New returns a Sorter spilling into dir. batchBytes bounds the in-memory
// batch and must hold at least one record of maxRecord bytes; fanIn >= 2
// bounds how many runs are merged at once.
func New(dir string, batchBytes, fanIn, maxRecord int) (*Sorter, error) {
	if fanIn < 2 {
		return nil, fmt.Errorf("spill: fan-in %d is below 2", fanIn)
	}
	if maxRecord < 1 || batchBytes < maxRecord+recordOverhead {
		return nil, fmt.Errorf("spill: batch of %d bytes cannot hold a record of %d bytes", batchBytes, maxRecord)
	}
	return &Sorter{dir: dir, batchBytes: batchBytes, fanIn: fanIn, maxRecord: maxRecord}, nil
}

// Add copies rec into the current batch, spilling a sorted run first if the
// batch would exceed its bound.
func (s *Sorter) Add(rec []byte) error {
	if s.closed {
		return errors.New("spill: sorter is closed")
	}
	if len(rec) > s.maxRecord {
		return fmt.Errorf("spill: record of %d bytes exceeds %d", len(rec), s.maxRecord)
	}
	if s.batchSize+len(rec)+recordOverhead > s.batchBytes {
		if err := s.spill(); err != nil {
			return err
		}
	}
	s.batch = append(s.batch, slices.Clone(rec))
	s.batchSize += len(rec) + recordOverhead
	return nil
}

// Runs returns how many run files have been written so far.
func (s *Sorter) Runs() int { return len(s.runs) }

func (s *Sorter) spill() error {
	if len(s.batch) == 0 {
		return nil
	}
	slices.SortFunc(s.batch, bytes.Compare)
	f, err := s.create()
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, readBuffer)
	for _, rec := range s.batch {
		if err := writeRecord(w, rec); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("spill: write run: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("spill: write run: %w", err)
	}
	s.runs = append(s.runs, f.Name())
	clear(s.batch)
	s.batch = s.batch[:0]
	s.batchSize = 0
	return nil
}

func (s *Sorter) create() (*os.File, error) {
	f, err := os.CreateTemp(s.dir, "qualbox-spill-*")
	if err != nil {
		return nil, fmt.Errorf("spill: create run in %s: %w", s.dir, err)
	}
	s.created = append(s.created, f.Name())
	return f, nil
}

func writeRecord(w *bufio.Writer, rec []byte) error {
	var n [binary.MaxVarintLen64]byte
	if _, err := w.Write(n[:binary.PutUvarint(n[:], uint64(len(rec)))]); err != nil {
		return fmt.Errorf("spill: write run: %w", err)
	}
	if _, err := w.Write(rec); err != nil {
		return fmt.Errorf("spill: write run: %w", err)
	}
	return nil
}

// Sorted calls fn with every record in ascending order; the slice is only
// valid during the call. Add must not be called afterwards.
func (s *Sorter) Sorted(fn func(rec []byte) error) error {
	if s.closed {
		return errors.New("spill: sorter is closed")
	}
	if len(s.runs) == 0 {
		slices.SortFunc(s.batch, bytes.Compare)
		for _, rec := range s.batch {
			if err := fn(rec); err != nil {
				return err
			}
		}
		return nil
	}
	if err := s.spill(); err != nil {
		return err
	}
	s.batch = nil
	// Merge passes until one merge of at most fanIn runs remains.
	for len(s.runs) > s.fanIn {
		var next []string
		for i := 0; i < len(s.runs); i += s.fanIn {
			group := s.runs[i:min(i+s.fanIn, len(s.runs))]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
			f, err := s.create()
			if err != nil {
				return err
			}
			w := bufio.NewWriterSize(f, readBuffer)
			err = s.merge(group, func(rec []byte) error { return writeRecord(w, rec) })
			if err == nil {
				err = w.Flush()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			for _, name := range group {
				s.remove(name)
			}
			next = append(next, f.Name())
		}
		s.runs = next
	}
	return s.merge(s.runs, fn)
}

func (s *Sorter) remove(name string) {
	os.Remove(name)
	s.created = slices.DeleteFunc(s.created, func(n string) bool { return n == name })
}

type cursor struct {
	r   *bufio.Reader
	f   *os.File
	rec []byte
}

type cursorHeap []*cursor

func (h cursorHeap) Len() int           { return len(h) }
func (h cursorHeap) Less(i, j int) bool { return bytes.Compare(h[i].rec, h[j].rec) < 0 }
func (h cursorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)        { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

func (s *Sorter) merge(names []string, fn func([]byte) error) (err error) {
	var h cursorHeap
	var all []*cursor
	defer func() {
		for _, c := range all {
			c.f.Close()
		}
	}()
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("spill: open run: %w", err)
		}
		c := &cursor{f: f, r: bufio.NewReaderSize(f, readBuffer)}
		all = append(all, c)
		ok, err := s.advance(c)
		if err != nil {
			return err
		}
		if ok {
			h = append(h, c)
		}
	}
	heap.Init(&h)
	for h.Len() > 0 {
		c := h[0]
		if err := fn(c.rec); err != nil {
			return err
		}
		ok, err := s.advance(c)
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return nil
}

func (s *Sorter) advance(c *cursor) (bool, error) {
	n, err := binary.ReadUvarint(c.r)
	if err == io.EOF {
		return false, nil
	}
	if err != nil || n > uint64(s.maxRecord) {
		return false, fmt.Errorf("spill: corrupt run %s", c.f.Name())
	}
	if cap(c.rec) < int(n) {
		c.rec = make([]byte, n, s.maxRecord)
	}
	c.rec = c.rec[:n]
	if _, err := io.ReadFull(c.r, c.rec); err != nil {
		return false, fmt.Errorf("spill: corrupt run %s: %w", c.f.Name(), err)
	}
	return true, nil
}

// Close removes every spill file the sorter created. It is safe to call
// more than once and after a failure.
func (s *Sorter) Close() error {
	s.closed = true
	s.batch = nil
	var errs []error
	for _, name := range s.created {
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	s.created = nil
	s.runs = nil
	return errors.Join(errs...)
}
