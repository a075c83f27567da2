package driver_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
)

// Benchmarks print their ratio against a reference measured in the same run
// on the same Engine and image (`make bench`). They run once per -benchtime
// iteration with an inner loop, so use -benchtime 1x.

const startRuns = 20

func benchBackend(b *testing.B) *driver.Backend {
	b.Helper()
	be, err := driver.New(driver.Config{
		Profile: "linux-x64-cgroupv1", Endpoint: "unix://" + enginetest.Socket(), Namespace: "qualbox-bench",
		SpillDirectory: b.TempDir(), ImageID: enginetest.Image(b), User: driver.User{UID: 65534, GID: 65534},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	return be
}

func quantiles(d []time.Duration) (median, p95 time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2], s[(len(s)*95+99)/100-1]
}

// BenchmarkStartLatency measures reserve to first stdout byte of `echo`
// through qualbox against a minimal create+start+exec of the same image
// through the client directly. Target: median ratio <= 1.5.
func BenchmarkStartLatency(b *testing.B) {
	be := benchBackend(b)
	cli := enginetest.Client(b)
	image := enginetest.Image(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		var ours, ref []time.Duration
		for run := 0; run < startRuns; run++ {
			d, err := qualboxFirstByte(ctx, be)
			if err != nil {
				b.Fatal(err)
			}
			ours = append(ours, d)
			d, err = clientFirstByte(ctx, cli, image)
			if err != nil {
				b.Fatal(err)
			}
			ref = append(ref, d)
		}
		om, op := quantiles(ours)
		rm, rp := quantiles(ref)
		b.ReportMetric(float64(om.Milliseconds()), "qualbox-median-ms")
		b.ReportMetric(float64(op.Milliseconds()), "qualbox-p95-ms")
		b.ReportMetric(float64(rm.Milliseconds()), "client-median-ms")
		b.ReportMetric(float64(rp.Milliseconds()), "client-p95-ms")
		b.ReportMetric(float64(om)/float64(rm), "median-ratio")
		b.ReportMetric(float64(op)/float64(rp), "p95-ratio")
		fmt.Fprintf(os.Stderr, "start latency over %d runs: qualbox median %v p95 %v; client median %v p95 %v; ratio median %.2f p95 %.2f (target <= 1.5)\n",
			startRuns, om, op, rm, rp, float64(om)/float64(rm), float64(op)/float64(rp))
	}
}

func qualboxFirstByte(ctx context.Context, be *driver.Backend) (time.Duration, error) {
	t0 := time.Now()
	res, err := be.Reserve(sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.InProcess())
	if err != nil {
		return 0, err
	}
	defer res.Destroy(context.WithoutCancel(ctx))
	sb, err := res.Start(ctx)
	if err != nil {
		return 0, err
	}
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/echo", Args: []string{"hello"}, Cwd: "/"})
	if err != nil {
		return 0, err
	}
	p, err := pr.Start(ctx)
	if err != nil {
		return 0, err
	}
	var one [1]byte
	if _, err := io.ReadFull(p.Stdout(), one[:]); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	_, _ = io.Copy(io.Discard, p.Stdout())
	return d, nil
}

// plainContainer creates and starts a minimal keeper container of image
// through the client directly, the benchmarks' reference; remove removes
// exactly it.
func plainContainer(ctx context.Context, cli *client.Client, image string) (id string, remove func(), err error) {
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Entrypoint: []string{"/bin/sh"}, Cmd: []string{"-c", "while :; do sleep 3600; done"}},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		return "", func() {}, err
	}
	remove = func() {
		_, _ = cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true})
	}
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return "", remove, err
	}
	return created.ID, remove, nil
}

func clientFirstByte(ctx context.Context, cli *client.Client, image string) (time.Duration, error) {
	t0 := time.Now()
	id, remove, err := plainContainer(ctx, cli, image)
	defer remove()
	if err != nil {
		return 0, err
	}
	ex, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{AttachStdout: true, AttachStderr: true, Cmd: []string{"/bin/echo", "hello"}})
	if err != nil {
		return 0, err
	}
	att, err := cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return 0, err
	}
	defer att.Close()
	var header [9]byte // 8-byte frame header and the first payload byte
	if _, err := io.ReadFull(att.Reader, header[:]); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

const throughputBytes = 1 << 30

var throughputCmd = []string{"/bin/sh", "-c", fmt.Sprintf("head -c %d /dev/zero", throughputBytes)}

// BenchmarkStdoutThroughput moves 1 GiB of stdout through a sandbox process
// and through a plain client exec of the same command copied to io.Discard.
// Target: throughput ratio >= 0.9.
func BenchmarkStdoutThroughput(b *testing.B) {
	be := benchBackend(b)
	cli := enginetest.Client(b)
	image := enginetest.Image(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		ours, err := sandboxCopy(ctx, be, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		ref, err := clientCopy(ctx, cli, image)
		if err != nil {
			b.Fatal(err)
		}
		om := float64(throughputBytes) / ours.Seconds() / (1 << 20)
		rm := float64(throughputBytes) / ref.Seconds() / (1 << 20)
		b.ReportMetric(om, "qualbox-MiB/s")
		b.ReportMetric(rm, "client-MiB/s")
		b.ReportMetric(om/rm, "throughput-ratio")
		fmt.Fprintf(os.Stderr, "stdout throughput of 1 GiB: qualbox %.0f MiB/s (%v), client exec %.0f MiB/s (%v), ratio %.2f (target >= 0.9)\n", om, ours, rm, ref, om/rm)
	}
}

func sandboxCopy(ctx context.Context, be *driver.Backend, w io.Writer) (time.Duration, error) {
	policy := enginetest.Policy()
	res, err := be.Reserve(sandboxapi.Request{Policy: policy}, sandboxapi.InProcess())
	if err != nil {
		return 0, err
	}
	defer res.Destroy(context.WithoutCancel(ctx))
	sb, err := res.Start(ctx)
	if err != nil {
		return 0, err
	}
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: throughputCmd[0], Args: throughputCmd[1:], Cwd: "/"})
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	p, err := pr.Start(ctx)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(w, p.Stdout())
	if err != nil {
		return 0, err
	}
	d := time.Since(t0)
	if n != throughputBytes {
		return 0, fmt.Errorf("sandbox delivered %d bytes, want %d", n, throughputBytes)
	}
	return d, nil
}

func clientCopy(ctx context.Context, cli *client.Client, image string) (time.Duration, error) {
	id, remove, err := plainContainer(ctx, cli, image)
	defer remove()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	ex, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{AttachStdout: true, AttachStderr: true, Cmd: throughputCmd})
	if err != nil {
		return 0, err
	}
	att, err := cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return 0, err
	}
	defer att.Close()
	n, err := stdcopy.StdCopy(io.Discard, io.Discard, att.Reader)
	if err != nil {
		return 0, err
	}
	if n != throughputBytes {
		return 0, fmt.Errorf("client exec delivered %d bytes", n)
	}
	return time.Since(t0), nil
}

// slowWriter consumes like a slow reader: it sleeps 1 ms every 2 writes
// (io.Copy writes at most 32 KiB, so at most ~64 MiB/s, below the producer),
// so backpressure holds the producer for the whole run.
type slowWriter struct{ n int }

func (w *slowWriter) Write(p []byte) (int, error) {
	w.n++
	if w.n%2 == 0 {
		time.Sleep(time.Millisecond)
	}
	return len(p), nil
}

func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkSlowReaderMemory streams 1 GiB of output to a slow reader and
// reports the controller's peak heap and RSS growth over the run, sampled
// every 10 ms. Target: both under 16 MiB.
func BenchmarkSlowReaderMemory(b *testing.B) {
	be := benchBackend(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap0, rss0 := int64(ms.HeapInuse), rssBytes()
		var peakHeap, peakRSS atomic.Int64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					if h := int64(m.HeapInuse) - heap0; h > peakHeap.Load() {
						peakHeap.Store(h)
					}
					if r := rssBytes() - rss0; r > peakRSS.Load() {
						peakRSS.Store(r)
					}
				}
			}
		}()
		d, err := sandboxCopy(ctx, be, &slowWriter{})
		close(stop)
		<-done
		if err != nil {
			b.Fatal(err)
		}
		h, r := float64(peakHeap.Load())/(1<<20), float64(peakRSS.Load())/(1<<20)
		b.ReportMetric(h, "heap-growth-MiB")
		b.ReportMetric(r, "rss-growth-MiB")
		fmt.Fprintf(os.Stderr, "slow reader over 1 GiB (%v): peak heap growth %.1f MiB, peak RSS growth %.1f MiB (target < 16 MiB each)\n", d, h, r)
	}
}
