package spill

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"gotest.tools/v3/assert"
)

func TestSortedAcrossRunsAndMergePasses(t *testing.T) {
	for _, n := range []int{0, 1, 5, 1000, 20000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			dir := t.TempDir()
			s, err := New(dir, 4096, 3, 64)
			assert.NilError(t, err)
			rng := rand.New(rand.NewPCG(1, uint64(n)))
			var want [][]byte
			for range n {
				rec := fmt.Appendf(nil, "entry-%d", rng.IntN(n*2+1))
				want = append(want, rec)
				assert.NilError(t, s.Add(rec))
			}
			slices.SortFunc(want, bytes.Compare)
			var got [][]byte
			assert.NilError(t, s.Sorted(func(rec []byte) error {
				got = append(got, slices.Clone(rec))
				return nil
			}))
			assert.DeepEqual(t, got, want)
			if n >= 1000 {
				assert.Check(t, s.Runs() <= 3, "merge passes reduce runs to the fan-in, got %d", s.Runs())
			}
			assert.NilError(t, s.Close())
			left, err := os.ReadDir(dir)
			assert.NilError(t, err)
			assert.Equal(t, len(left), 0, "every spill file is removed")
		})
	}
}

func TestBounds(t *testing.T) {
	_, err := New(t.TempDir(), 100, 1, 10)
	assert.ErrorContains(t, err, "fan-in")
	_, err = New(t.TempDir(), 10, 2, 10)
	assert.ErrorContains(t, err, "cannot hold")
	s, err := New(t.TempDir(), 1000, 2, 10)
	assert.NilError(t, err)
	assert.ErrorContains(t, s.Add(make([]byte, 11)), "exceeds")
	assert.NilError(t, s.Close())
	assert.ErrorContains(t, s.Add([]byte("x")), "closed")
}

func TestCloseAfterFailedCallbackRemovesRuns(t *testing.T) {
	dir := t.TempDir()
	s, err := New(dir, 256, 2, 16)
	assert.NilError(t, err)
	for i := range 500 {
		assert.NilError(t, s.Add(fmt.Appendf(nil, "%08d", i)))
	}
	stop := fmt.Errorf("stop")
	assert.Equal(t, s.Sorted(func([]byte) error { return stop }), stop)
	assert.NilError(t, s.Close())
	left, _ := os.ReadDir(dir)
	assert.Equal(t, len(left), 0)
}
