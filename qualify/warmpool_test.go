package qualify_test

// The warm-pool scenario on the real Engine, and its negative tests: a
// pool, a backend or a store made to misbehave in the way each check
// exists to catch (docs/qualification.md#warm-pool).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/scenario"
	"github.com/qualbox/qualbox/sandboxapi"
)

func TestWarmPool(t *testing.T) {
	start := time.Now()
	run, out := runScenarios(t, "warm-pool")
	assertPassed(t, run, "warm-pool")
	ev := scenarioEvidence(t, out, run, "warm-pool")
	t.Logf("warm-pool took %s (the scenario itself %d ms)", time.Since(start).Round(time.Millisecond), ev.Timing.DurationMs)
	names := checkNames(ev)
	for _, want := range []string{
		"distinct: acquisition 5 finds its workspace without an earlier acquisition's file",
		"distinct: the acquisitions are distinct sandboxes with distinct compute containers and volumes",
		"expiry: the expired sandbox is gone (exact names and IDs)",
		"expiry: every handed-out sandbox and every younger idle one is still present (exact names and IDs)",
		"expiry: a replacement started and the pool is full again",
		"death: the store holds a running record of each pooled sandbox the child reported",
		"death: a fresh controller reconciled and destroyed each pooled sandbox",
		"death: nothing of the pooled sandboxes remains (exact names and IDs)",
		"identity: acquisition 4 is refused with *sandboxapi.StateError naming the other daemon, nothing handed out",
		"identity: acquisition 4: the refused sandbox is gone (exact names and IDs)",
		"close: no goroutine runs sandboxapi.Pool code once Close returned",
		"close: Close returned nil and every idle sandbox is gone (exact names and IDs)",
	} {
		assert.Check(t, strings.Contains(names, want+"\n"), "no check %q", want)
	}
	// Every sandbox the pools started is in the evidence and was checked
	// absent: 5 acquired + 4 refilled (distinct), 4 + 3 refills + at least
	// one replacement (expiry), 4 (death), 4 + 4 refills (identity), 4
	// (close), each with compute, export and storage.
	assert.Check(t, len(ev.Resources) >= 3*(9+8+4+8+4), "%d resources", len(ev.Resources))
}

// failedCheck reports whether ev has a failed check matching re.
func failedCheck(ev *evidence.Scenario, re *regexp.Regexp) bool {
	for _, c := range ev.Checks {
		if !c.OK && re.MatchString(c.Name) {
			return true
		}
	}
	return false
}

// handOutTwice hands the first sandbox out again at the second Acquire.
type handOutTwice struct {
	scenario.PoolHandle
	n     int
	first sandboxapi.Sandbox
}

func (p *handOutTwice) Acquire(ctx context.Context) (sandboxapi.Sandbox, error) {
	p.n++
	if p.n == 2 && p.first != nil {
		return p.first, nil
	}
	sb, err := p.PoolHandle.Acquire(ctx)
	if p.n == 1 {
		p.first = sb
	}
	return sb, err
}

func TestNegativeWarmPoolDistinct(t *testing.T) {
	runLie(t, lie{
		scenario: "warm-pool",
		params:   map[string]any{"cases": []any{"distinct"}},
		variant: scenario.WarmPool{Pool: func(_ string, p scenario.PoolHandle) scenario.PoolHandle {
			return &handOutTwice{PoolHandle: p}
		}},
		check: regexp.MustCompile(`^distinct: the acquisitions are distinct sandboxes with distinct compute containers and volumes$`),
	})
}

// carryWorkspace hands out fresh sandboxes with the previous one's
// workspace in them: it stops the sandbox acquired before, exports its
// whole workspace and imports it into the new one.
type carryWorkspace struct {
	scenario.PoolHandle
	dir  string
	n    int
	prev sandboxapi.Sandbox
}

func (p *carryWorkspace) Acquire(ctx context.Context) (sandboxapi.Sandbox, error) {
	sb, err := p.PoolHandle.Acquire(ctx)
	prev := p.prev
	p.prev = sb
	if err != nil || prev == nil {
		return sb, err
	}
	if err := prev.Stop(ctx); err != nil {
		return sb, err
	}
	p.n++
	tree := filepath.Join(p.dir, fmt.Sprint(p.n))
	if err := prev.(sandboxapi.Transferer).ExportTree(ctx, sandboxapi.Whole(), sandboxapi.DirSink(tree), sandboxapi.TransferOptions{}); err != nil {
		return sb, err
	}
	return sb, sb.(sandboxapi.Transferer).ImportTree(ctx, sandboxapi.DirSource(tree), sandboxapi.TransferOptions{})
}

func TestNegativeWarmPoolFreshWorkspace(t *testing.T) {
	dir := t.TempDir()
	ev := runLie(t, lie{
		scenario: "warm-pool",
		params:   map[string]any{"cases": []any{"distinct"}},
		variant: scenario.WarmPool{Pool: func(_ string, p scenario.PoolHandle) scenario.PoolHandle {
			return &carryWorkspace{PoolHandle: p, dir: dir}
		}},
		check: regexp.MustCompile(`^distinct: acquisition 2 finds its workspace without an earlier acquisition's file$`),
	})
	// The sandboxes are distinct: only the workspace check says what is wrong.
	assert.Check(t, !failedCheck(ev, regexp.MustCompile(`distinct sandboxes`)))
}

// wrapped is a backend whose started sandboxes are wrapped by sandbox
// and whose reservations pass reserve first.
type wrapped struct {
	sandboxapi.Backend
	reserve func() error
	sandbox func(sandboxapi.Sandbox) sandboxapi.Sandbox
}

func (b wrapped) Reserve(req sandboxapi.Request, rp sandboxapi.RecoveryPolicy) (sandboxapi.Reservation, error) {
	if b.reserve != nil {
		if err := b.reserve(); err != nil {
			return nil, err
		}
	}
	res, err := b.Backend.Reserve(req, rp)
	if err != nil || b.sandbox == nil {
		return res, err
	}
	return wrappedReservation{res, b.sandbox}, nil
}

type wrappedReservation struct {
	sandboxapi.Reservation
	wrap func(sandboxapi.Sandbox) sandboxapi.Sandbox
}

func (r wrappedReservation) Start(ctx context.Context) (sandboxapi.Sandbox, error) {
	sb, err := r.Reservation.Start(ctx)
	if err != nil {
		return sb, err
	}
	return r.wrap(sb), nil
}

// checked is a sandbox whose readiness check is check.
type checked struct {
	sandboxapi.Sandbox
	check func(context.Context) error
}

func (s *checked) CheckReady(ctx context.Context) error { return s.check(ctx) }

// misdirect makes the first sandbox the pool stops and destroys hand its
// first Stop and Destroy to the sandbox started last before it: the
// pool believes it destroyed one sandbox and another is gone.
type misdirect struct {
	mu      sync.Mutex
	started []*misdirected
	from    *misdirected
	to      *misdirected
	stops   int
	dests   int
}

type misdirected struct {
	sandboxapi.Sandbox
	m *misdirect
}

func (s *misdirected) CheckReady(ctx context.Context) error {
	return s.Sandbox.(sandboxapi.ReadinessChecker).CheckReady(ctx)
}

// target returns whom s's call goes to; n counts s's misdirected calls of
// that kind.
func (m *misdirect) target(s *misdirected, n *int) *misdirected {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.from == nil {
		for i := len(m.started) - 1; i >= 0; i-- {
			if m.started[i] != s {
				m.from, m.to = s, m.started[i]
				break
			}
		}
	}
	if m.from == s && *n == 0 {
		*n++
		return m.to
	}
	return s
}

func (s *misdirected) Stop(ctx context.Context) error {
	return s.m.target(s, &s.m.stops).Sandbox.Stop(ctx)
}

func (s *misdirected) Destroy(ctx context.Context) error {
	return s.m.target(s, &s.m.dests).Sandbox.Destroy(ctx)
}

func TestNegativeWarmPoolExpiryDestroysTheWrongOne(t *testing.T) {
	ev := runLie(t, lie{
		scenario: "warm-pool",
		params:   map[string]any{"cases": []any{"expiry"}},
		variant: scenario.WarmPool{Backend: func(_ string, b sandboxapi.Backend) sandboxapi.Backend {
			m := &misdirect{}
			return wrapped{Backend: b, sandbox: func(sb sandboxapi.Sandbox) sandboxapi.Sandbox {
				s := &misdirected{Sandbox: sb, m: m}
				m.mu.Lock()
				m.started = append(m.started, s)
				m.mu.Unlock()
				return s
			}}
		}},
		check: regexp.MustCompile(`^expiry: the expired sandbox is gone \(exact names and IDs\)$`),
	})
	assert.Check(t, failedCheck(ev, regexp.MustCompile(`^expiry: every handed-out sandbox and every younger idle one is still present`)),
		"the sandbox destroyed in the expired one's place is missed")
}

func TestNegativeWarmPoolNoReplacement(t *testing.T) {
	// Reservations beyond the pool's first fill and the refills of the
	// three acquisitions fail: the expired sandbox is never replaced.
	var mu sync.Mutex
	n := 0
	runLie(t, lie{
		scenario: "warm-pool",
		params:   map[string]any{"cases": []any{"expiry"}, "size": 4},
		variant: scenario.WarmPool{Backend: func(_ string, b sandboxapi.Backend) sandboxapi.Backend {
			return wrapped{Backend: b, reserve: func() error {
				mu.Lock()
				defer mu.Unlock()
				if n++; n > 7 {
					return &sandboxapi.UnsupportedError{Message: "test: no reservation after the seventh"}
				}
				return nil
			}}
		}},
		check: regexp.MustCompile(`^expiry: a replacement started and the pool is full again$`),
	})
}

func TestNegativeWarmPoolStoreLosesARecord(t *testing.T) {
	ev := runLie(t, lie{
		scenario: "warm-pool",
		params:   map[string]any{"cases": []any{"death"}},
		variant: scenario.WarmPool{AfterDeath: func(dir string) error {
			files, err := filepath.Glob(filepath.Join(dir, "*.json"))
			if err != nil || len(files) == 0 {
				return fmt.Errorf("no record to lose in %s: %v", dir, err)
			}
			return os.Remove(files[0])
		}},
		check: regexp.MustCompile(`^death: the store holds a running record of each pooled sandbox the child reported$`),
	})
	for _, c := range []string{
		`^death: a fresh controller reconciled and destroyed each pooled sandbox$`,
		`^death: nothing of the pooled sandboxes remains \(exact names and IDs\)$`,
	} {
		assert.Check(t, failedCheck(ev, regexp.MustCompile(c)), "%s did not fail", c)
	}
}

func TestNegativeWarmPoolIdentityCheckDisabled(t *testing.T) {
	// The pooled sandboxes' readiness check passes whatever the daemon.
	ev := runLie(t, lie{
		scenario: "warm-pool",
		params:   map[string]any{"cases": []any{"identity"}, "size": 2},
		variant: scenario.WarmPool{Backend: func(_ string, b sandboxapi.Backend) sandboxapi.Backend {
			return wrapped{Backend: b, sandbox: func(sb sandboxapi.Sandbox) sandboxapi.Sandbox {
				return &checked{Sandbox: sb, check: func(context.Context) error { return nil }}
			}}
		}},
		check: regexp.MustCompile(`^identity: acquisition 1 is refused with \*sandboxapi\.StateError naming the other daemon, nothing handed out$`),
	})
	assert.Check(t, failedCheck(ev, regexp.MustCompile(`^identity: acquisition 1: the refused sandbox is gone`)))
}

func TestNegativeWarmPoolRefusedNotDestroyed(t *testing.T) {
	// Container removals are answered but never reach the Engine: the
	// refused sandbox is still there.
	runLie(t, lie{
		scenario: "warm-pool",
		params:   map[string]any{"cases": []any{"identity"}, "size": 2},
		rules:    fakeRemove(0),
		check:    regexp.MustCompile(`^identity: acquisition 1: the refused sandbox is gone \(exact names and IDs\)$`),
	})
}

func TestNegativeWarmPoolCloseLeavesSandboxes(t *testing.T) {
	runLie(t, lie{
		scenario: "warm-pool",
		params:   map[string]any{"cases": []any{"close"}, "size": 2},
		rules:    fakeRemove(0),
		check:    regexp.MustCompile(`^close: Close returned nil and every idle sandbox is gone \(exact names and IDs\)$`),
	})
}

// closeEarly returns from Close as soon as the pool's own Close has
// begun, which then goes on in the background.
type closeEarly struct {
	scenario.PoolHandle
	done chan error
}

func (p *closeEarly) Close(ctx context.Context) error {
	go func() { p.done <- p.PoolHandle.Close(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(p.PoolHandle.Idle()) > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return nil
}

func TestNegativeWarmPoolCloseReturnsEarly(t *testing.T) {
	done := make(chan error, 1)
	runLie(t, lie{
		scenario: "warm-pool",
		params:   map[string]any{"cases": []any{"close"}},
		variant: scenario.WarmPool{Pool: func(_ string, p scenario.PoolHandle) scenario.PoolHandle {
			return &closeEarly{PoolHandle: p, done: done}
		}},
		check: regexp.MustCompile(`^close: no goroutine runs sandboxapi\.Pool code once Close returned$`),
	})
	select {
	case err := <-done: // its destroys may fail: the scenario closed the backend meanwhile
		t.Logf("background Close: %v", err)
	case <-time.After(2 * time.Minute):
		t.Error("the background Close did not return")
	}
}
