package driver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
	"github.com/qualbox/qualbox/testbed/containers"
)

// ttiSequentialRuns is the number of sequential warm acquisitions, as in
// the public leaderboard's 100 runs per provider.
const ttiSequentialRuns = 100

// BenchmarkWarmTTI measures time to interactive of pooled starts
// (docs/contract.md#pool): Acquire to the first byte of a command's
// stdout, sequential (ttiSequentialRuns, each waiting, untimed, for an
// idle sandbox) and in bursts of 16 and 32 at once from a full pool of 32,
// with median, p95, p99 and success rate. Each sequential sample is
// interleaved with the reference, the plain client's exec into an already
// running container to its first byte. It also reports the controller's
// heap per idle pooled sandbox (target < 256 KiB). Run with -benchtime 1x.
func BenchmarkWarmTTI(b *testing.B) {
	be := benchBackend(b)
	cli := enginetest.Client(b)
	ctx := context.Background()
	refID := runningReference(b, ctx, cli)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	pool, err := sandboxapi.NewPool(be, sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.PoolOptions{
		Size: 32, MaxIdle: time.Hour, StartParallelism: 2, RetryDelay: time.Second, Recovery: sandboxapi.InProcess(),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := pool.Close(context.Background()); err != nil {
			b.Error(err)
		}
	})
	fillPool(b, pool, 32)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perIdle := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / 32 / 1024
	recordValue(b, "heap per idle pooled sandbox", below(256), perIdle, "KiB")

	b.ResetTimer()
	for range b.N {
		var warm, ref []float64
		var prof warmProfile
		ok := 0
		for range ttiSequentialRuns {
			fillPool(b, pool, 1)
			r, err := referenceTTI(ctx, cli, refID)
			if err != nil {
				b.Fatal(err)
			}
			adm, err := referenceAdmission(ctx, cli)
			if err != nil {
				b.Fatal(err)
			}
			ph, err := warmTTI(ctx, pool)
			if err == nil {
				ok++
				d := ph.firstByte
				warm = append(warm, ms(d))
				ref = append(ref, ms(r))
				prof.add(ph, r, adm)
				recordRatio(b, "warm TTI sequential", atMost(1.2), d.Seconds()/r.Seconds(), ms(d), ms(r), "ms")
				recordValue(b, "warm TTI sequential, absolute", below(100), ms(d), "ms")
			} else {
				b.Logf("warm TTI: %v", err)
			}
		}
		logTTI(b, "warm sequential", warm, ok, ttiSequentialRuns)
		if len(warm) > 0 {
			recordValue(b, "warm TTI sequential p99", below(250), nearestRank(warm, 0.99), "ms")
		}
		logTTI(b, "reference exec into a running container", ref, len(ref), len(ref))
		prof.log(b)
		for _, n := range []int{16, 32} {
			fillPool(b, pool, 32)
			got, ok := burst(n, func() (time.Duration, error) {
				ph, err := warmTTI(ctx, pool)
				return ph.firstByte, err
			})
			logTTI(b, fmt.Sprintf("warm burst %d from a pool of 32", n), got, ok, n)
			for _, v := range got {
				recordValue(b, fmt.Sprintf("warm TTI burst %d", n), below(1000), v, "ms")
			}
			theirs, theirOK := burst(n, func() (time.Duration, error) { return referenceTTI(ctx, cli, refID) })
			logTTI(b, fmt.Sprintf("reference burst %d: execs at once into one running container", n), theirs, theirOK, n)
		}
	}
}

// warmPhases are one warm start's times from the call to Acquire: when
// Acquire returned (the hand-out check), when process Start returned (the
// compute inspections, exec create and exec start), and the first stdout
// byte.
type warmPhases struct {
	acquired, started, firstByte time.Duration
}

// warmProfile collects where the sequential warm starts' time goes, each
// phase beside the reference that bounds it: the hand-out check beside a
// plain client's /version and /info read at once (one daemon admission's
// reads), and exec start to first byte beside the plain client's whole
// exec into a running container.
type warmProfile struct {
	acquire, start, exec, refExec, refAdmission []float64
}

func (p *warmProfile) add(ph warmPhases, refExec, refAdmission time.Duration) {
	p.acquire = append(p.acquire, ms(ph.acquired))
	p.start = append(p.start, ms(ph.started-ph.acquired))
	p.exec = append(p.exec, ms(ph.firstByte-ph.started))
	p.refExec = append(p.refExec, ms(refExec))
	p.refAdmission = append(p.refAdmission, ms(refAdmission))
}

func (p *warmProfile) log(b *testing.B) {
	b.Helper()
	if len(p.acquire) == 0 {
		return
	}
	b.Logf("warm TTI profile (medians of %d sequential starts): Acquire %.1f ms (hand-out check: one daemon admission and one inspect; "+
		"reference /version and /info read at once %.1f ms), then process Start %.1f ms (compute inspected twice, exec create, exec start), "+
		"then first byte %.1f ms (reference: the whole exec into a running container %.1f ms)",
		len(p.acquire), median(p.acquire), median(p.refAdmission), median(p.start), median(p.exec), median(p.refExec))
}

// referenceAdmission times the plain client's /version and /info read at
// once: the Engine work of one daemon admission.
func referenceAdmission(ctx context.Context, cli *client.Client) (time.Duration, error) {
	t0 := time.Now()
	var wg sync.WaitGroup
	var verErr error
	wg.Go(func() { _, verErr = cli.ServerVersion(ctx, client.ServerVersionOptions{}) })
	_, err := cli.Info(ctx, client.InfoOptions{})
	wg.Wait()
	return time.Since(t0), errors.Join(verErr, err)
}

// BenchmarkColdTTI measures time to interactive of cold starts in the
// same form as BenchmarkWarmTTI: Reserve to the first stdout byte of
// /bin/echo in a new sandbox, ttiSequentialRuns times in sequence, each
// interleaved with the reference (the plain client's create, start and
// exec of the same image to its first byte, clientFirstByte), then bursts
// of 16 and 32 cold starts at once, each followed by a burst of the same
// size of the reference. It logs median, p95, p99 and success rate of
// each side and records the per-sample sequential ratio (target <= 1.2)
// and each burst's ratio of medians. Run with -benchtime 1x.
func BenchmarkColdTTI(b *testing.B) {
	be := benchBackend(b)
	cli := enginetest.Client(b)
	image := enginetest.Image(b)
	ctx := context.Background()
	// One untimed round of both sides (see BenchmarkStartLatency).
	if _, err := qualboxFirstByte(ctx, be, echoCmd); err != nil {
		b.Fatal(err)
	}
	if _, err := clientFirstByte(ctx, cli, image, echoCmd); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		var cold, ref []float64
		ok, refOK := 0, 0
		for range ttiSequentialRuns {
			d, err := qualboxFirstByte(ctx, be, echoCmd)
			r, rerr := clientFirstByte(ctx, cli, image, echoCmd)
			if err != nil {
				b.Logf("cold TTI: %v", err)
			} else {
				ok++
				cold = append(cold, ms(d))
			}
			if rerr != nil {
				b.Logf("reference: %v", rerr)
			} else {
				refOK++
				ref = append(ref, ms(r))
			}
			if err == nil && rerr == nil {
				recordRatio(b, "cold TTI sequential", atMost(1.2), d.Seconds()/r.Seconds(), ms(d), ms(r), "ms")
			}
		}
		logTTI(b, "cold sequential", cold, ok, ttiSequentialRuns)
		logTTI(b, "reference create+start+exec, sequential", ref, refOK, ttiSequentialRuns)
		for _, n := range []int{16, 32} {
			ours, ourOK := burst(n, func() (time.Duration, error) { return qualboxFirstByte(ctx, be, echoCmd) })
			theirs, theirOK := burst(n, func() (time.Duration, error) { return clientFirstByte(ctx, cli, image, echoCmd) })
			logTTI(b, fmt.Sprintf("cold burst %d", n), ours, ourOK, n)
			logTTI(b, fmt.Sprintf("reference burst %d", n), theirs, theirOK, n)
			if len(ours) > 0 && len(theirs) > 0 {
				mo, mt := median(ours), median(theirs)
				recordRatio(b, fmt.Sprintf("cold TTI burst %d (medians)", n), atMost(1.2), mo/mt, mo, mt, "ms")
			}
		}
	}
}

// burst runs start n times at once and returns the durations of those
// that succeeded (ms) and how many did.
func burst(n int, start func() (time.Duration, error)) ([]float64, int) {
	var mu sync.Mutex
	var out []float64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := start()
			if err == nil {
				mu.Lock()
				out = append(out, ms(d))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out, len(out)
}

// fillPool waits, untimed, until pool has at least n idle sandboxes.
func fillPool(b *testing.B, pool *sandboxapi.Pool, n int) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	deadline := time.Now().Add(5 * time.Minute)
	for len(pool.Idle()) < n {
		if time.Now().After(deadline) {
			b.Fatalf("pool did not reach %d idle sandboxes", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// warmTTI acquires a sandbox and times Acquire to the first stdout byte
// of /bin/echo, with the phases between, then destroys the sandbox
// (untimed).
func warmTTI(ctx context.Context, pool *sandboxapi.Pool) (ph warmPhases, err error) {
	t0 := time.Now()
	sb, err := pool.Acquire(ctx)
	if err != nil {
		return ph, err
	}
	ph.acquired = time.Since(t0)
	defer func() {
		if derr := sb.Destroy(context.WithoutCancel(ctx)); derr != nil && err == nil {
			err = derr
		}
	}()
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: echoCmd[0], Args: echoCmd[1:], Cwd: sb.Workspace()})
	if err != nil {
		return ph, err
	}
	p, err := pr.Start(ctx)
	if err != nil {
		return ph, err
	}
	ph.started = time.Since(t0)
	var one [1]byte
	if _, err := io.ReadFull(p.Stdout(), one[:]); err != nil {
		return ph, err
	}
	ph.firstByte = time.Since(t0)
	_, _ = io.Copy(io.Discard, p.Stdout())
	_, _ = io.Copy(io.Discard, p.Stderr())
	_, err = p.Wait(ctx)
	return ph, err
}

// runningReference starts the reference container, the image's keeper
// without any of the sandbox's configuration, and removes it by ID at the
// end of the benchmark.
func runningReference(b *testing.B, ctx context.Context, cli *client.Client) string {
	b.Helper()
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: enginetest.Image(b), Entrypoint: containers.KeeperCommand[:1], Cmd: containers.KeeperCommand[1:]},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if _, err := cli.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			b.Error(err)
		}
	})
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		b.Fatal(err)
	}
	return created.ID
}

// referenceTTI times the plain client's exec create, attach and start of
// /bin/echo in the running reference container to the first byte.
func referenceTTI(ctx context.Context, cli *client.Client, id string) (time.Duration, error) {
	t0 := time.Now()
	att, err := execAttach(ctx, cli, id, echoCmd, false)
	if err != nil {
		return 0, err
	}
	defer att.Close()
	var one [1]byte
	if _, err := io.ReadFull(att.Reader, one[:]); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	_, _ = io.Copy(io.Discard, att.Reader)
	return d, nil
}

// logTTI logs median, p95, p99 (nearest rank) and success rate.
func logTTI(b *testing.B, what string, v []float64, ok, n int) {
	b.Helper()
	b.Logf("TTI %s: median %.1f ms, p95 %.1f ms, p99 %.1f ms, success %d/%d (%.1f %%)",
		what, nearestRank(v, 0.5), nearestRank(v, 0.95), nearestRank(v, 0.99), ok, n, 100*float64(ok)/float64(n))
}

// nearestRank returns the p quantile (0..1) of v by nearest rank, 0 for
// no samples.
func nearestRank(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}
