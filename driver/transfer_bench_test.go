package driver_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
)

// Transfer benchmarks (`make bench-transfer`, sampled and reported as
// described in benchstats_test.go).
//
// BenchmarkImport/BenchmarkExport: 256 MiB in 10,000 files against
// `docker cp` of the same tree (ratio = docker cp time / driver time, so
// >= 1.0 means the driver is at least as fast). BenchmarkExportPeakRSS:
// peak controller RSS (VmHWM, reset through /proc/self/clear_refs) while
// exporting 200,000 versus 10,000 small files.

const (
	benchFiles = 10000
	benchBytes = 256 << 20
)

func benchPolicy() sandboxapi.Policy {
	p := enginetest.Policy()
	p.Transfers.ChunkBytes = 1 << 20
	p.Deadlines.CleanupMs = 10 * 60 * 1000
	return p
}

var sharedTree struct {
	once sync.Once
	root string
	err  error
}

// benchTree returns a directory holding 256 MiB in 10,000 files, 100 per
// directory, written once per process and removed at its exit.
func benchTree(b *testing.B) string {
	b.Helper()
	sharedTree.once.Do(func() {
		sharedTree.root, sharedTree.err = writeBenchTree()
		if sharedTree.err == nil {
			atProcessExit(func() error { return os.RemoveAll(sharedTree.root) })
		}
	})
	assert.NilError(b, sharedTree.err)
	return sharedTree.root
}

func writeBenchTree() (string, error) {
	root, err := os.MkdirTemp("", "qualbox-bench-tree-")
	if err != nil {
		return "", err
	}
	size := benchBytes / benchFiles
	rng := rand.New(rand.NewPCG(4, 4))
	buf := make([]byte, size+1)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for i := range benchFiles {
		dir := filepath.Join(root, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.Mkdir(dir, 0o755); err != nil {
				return root, err
			}
		}
		n := size
		if i < benchBytes%benchFiles {
			n++
		}
		buf[0] = byte(i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), buf[:n], 0o644); err != nil {
			return root, err
		}
	}
	return root, nil
}

// benchStarted mirrors started for benchmarks: destruction registered
// right after reservation, and an exact-ID check that nothing remains.
func benchStarted(b *testing.B, bk *driver.Backend, policy sandboxapi.Policy) sandboxapi.Sandbox {
	b.Helper()
	res, err := bk.Reserve(sandboxapi.Request{Policy: policy}, sandboxapi.InProcess())
	assert.NilError(b, err)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		assert.Check(b, res.Destroy(ctx))
		cli := enginetest.Client(b)
		for _, r := range res.RecoveryRecord().Resources {
			var err error
			switch r.Role {
			case sandboxapi.RoleCompute, sandboxapi.RoleExport:
				_, err = cli.ContainerInspect(ctx, r.Identity.ID, client.ContainerInspectOptions{})
			case sandboxapi.RoleStorage:
				_, err = cli.VolumeInspect(ctx, r.Identity.ID, client.VolumeInspectOptions{})
			default:
				continue
			}
			assert.Check(b, err != nil, "%s resource %s still exists", r.Role, r.Identity.ID)
		}
	})
	sb, err := res.Start(context.Background())
	assert.NilError(b, err)
	return sb
}

func resourceID(sb sandboxapi.Sandbox, role sandboxapi.Role) string {
	for _, r := range sb.RecoveryRecord().Resources {
		if r.Role == role {
			return r.Identity.ID
		}
	}
	return ""
}

func dockerCP(b *testing.B, args ...string) time.Duration {
	b.Helper()
	cmd := exec.Command("docker", append([]string{"-H", "unix://" + enginetest.Socket(), "cp", "-q"}, args...)...)
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+b.TempDir())
	start := time.Now()
	out, err := cmd.CombinedOutput()
	assert.NilError(b, err, "docker cp: %s", out)
	return time.Since(start)
}

func mibps(d time.Duration) float64 { return float64(benchBytes) / (1 << 20) / d.Seconds() }

func BenchmarkImport(b *testing.B) {
	src := benchTree(b)
	bk := benchBackend(b)
	for b.Loop() {
		b.StopTimer()
		sb := benchStarted(b, bk, benchPolicy())
		tr := sb.(sandboxapi.Transferer)
		b.StartTimer()
		start := time.Now()
		assert.NilError(b, tr.ImportTree(context.Background(), sandboxapi.DirSource(src), sandboxapi.TransferOptions{}))
		ours := time.Since(start)
		b.StopTimer()
		ref := dockerCP(b, src, resourceID(sb, sandboxapi.RoleCompute)+":/workspace/work/docker-cp")
		recordRatio(b, "import 256 MiB in 10,000 files", atLeast(1.0), ref.Seconds()/ours.Seconds(), mibps(ours), mibps(ref), "MiB/s")
		b.StartTimer()
	}
}

func BenchmarkExport(b *testing.B) {
	src := benchTree(b)
	bk := benchBackend(b)
	sb := benchStarted(b, bk, benchPolicy())
	tr := sb.(sandboxapi.Transferer)
	assert.NilError(b, tr.ImportTree(context.Background(), sandboxapi.DirSource(src), sandboxapi.TransferOptions{}))
	assert.NilError(b, sb.Stop(context.Background()))
	accessor := resourceID(sb, sandboxapi.RoleExport)
	for b.Loop() {
		b.StopTimer()
		dest := b.TempDir()
		b.StartTimer()
		start := time.Now()
		assert.NilError(b, tr.ExportTree(context.Background(), sandboxapi.Whole(), sandboxapi.DirSink(filepath.Join(dest, "driver")), sandboxapi.TransferOptions{}))
		ours := time.Since(start)
		b.StopTimer()
		ref := dockerCP(b, accessor+":/workspace/work", filepath.Join(dest, "docker-cp"))
		recordRatio(b, "export 256 MiB in 10,000 files", atLeast(1.0), ref.Seconds()/ours.Seconds(), mibps(ours), mibps(ref), "MiB/s")
		b.StartTimer()
	}
}

// smallSource generates n 16-byte files, 1,000 per directory, without
// holding the tree in memory.
type smallSource struct {
	n, i    int
	dirDone int
}

func (s *smallSource) Next() (sandboxapi.Entry, io.Reader, error) {
	if s.i >= s.n {
		return sandboxapi.Entry{}, nil, io.EOF
	}
	dir := fmt.Sprintf("d%04d", s.i/1000)
	if s.dirDone <= s.i/1000 {
		s.dirDone = s.i/1000 + 1
		return sandboxapi.Entry{Path: dir, Kind: sandboxapi.EntryDir, Mode: 0o755}, nil, nil
	}
	name := fmt.Sprintf("%s/small-file-%07d", dir, s.i)
	s.i++
	return sandboxapi.Entry{Path: name, Kind: sandboxapi.EntryFile, Mode: 0o644, Size: 16}, strings.NewReader(fmt.Sprintf("%016d", s.i)), nil
}

// countingSink drains bodies without keeping anything.
type countingSink struct{ entries, bytes int64 }

func (c *countingSink) Begin() error { return nil }
func (c *countingSink) Entry(e sandboxapi.Entry, body io.Reader) error {
	c.entries++
	if body != nil {
		n, err := io.Copy(io.Discard, body)
		c.bytes += n
		return err
	}
	return nil
}
func (c *countingSink) Commit() error  { return nil }
func (c *countingSink) Discard() error { return nil }

func procStatusKiB(b *testing.B, field string) int64 {
	b.Helper()
	v, err := procField("/proc/self/status", field)
	assert.NilError(b, err)
	return v
}

// exportPeak imports n small files, stops compute, resets the peak RSS and
// exports the whole workspace to a counting sink, returning VmHWM and the
// RSS just before the export, both in KiB.
func exportPeak(b *testing.B, n int) (peak, before int64) {
	b.Helper()
	bk := benchBackend(b)
	sb := benchStarted(b, bk, benchPolicy())
	tr := sb.(sandboxapi.Transferer)
	assert.NilError(b, tr.ImportTree(context.Background(), &smallSource{n: n}, sandboxapi.TransferOptions{}))
	assert.NilError(b, sb.Stop(context.Background()))
	runtime.GC()
	debug.FreeOSMemory()
	assert.NilError(b, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0), "reset VmHWM")
	before = procStatusKiB(b, "VmRSS")
	sink := &countingSink{}
	assert.NilError(b, tr.ExportTree(context.Background(), sandboxapi.Whole(), sink, sandboxapi.TransferOptions{}))
	peak = procStatusKiB(b, "VmHWM")
	assert.Equal(b, sink.entries, int64(n+(n+999)/1000))
	return peak, before
}

func BenchmarkExportPeakRSS(b *testing.B) {
	for b.Loop() {
		small, smallBefore := exportPeak(b, 10000)
		large, largeBefore := exportPeak(b, 200000)
		b.ReportMetric(float64(small-smallBefore), "growth-KiB-10k")
		b.ReportMetric(float64(large-largeBefore), "growth-KiB-200k")
		recordRatio(b, "export peak RSS 200,000 vs 10,000 entries", atMost(1.25), float64(large)/float64(small), float64(large), float64(small), "KiB")
	}
}
