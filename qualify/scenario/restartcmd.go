package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/client"
)

// The bounds of an Engine restart (engine-restart's params): the restart
// command's run and the wait, after it, for the Engine to answer again.
const (
	defaultRestartTimeout = 300 * time.Second
	defaultReadyTimeout   = 300 * time.Second
	maxRestartTimeout     = time.Hour
	// pingTimeout bounds one /_ping of the ready wait.
	pingTimeout = 3 * time.Second
	// streamEndGrace is how long, once the Engine answers again, the
	// event stream opened before the restart may take to report its end:
	// the daemon that served it is gone by then, so its end is already
	// on its way.
	streamEndGrace = 5 * time.Second
	// maxRestartOutput is how much of the restart command's output the
	// evidence keeps (bytes, the first ones).
	maxRestartOutput = 4 << 10
	// maxWatchedEvents is how many of the events the watched stream
	// carried during the restart the evidence keeps.
	maxWatchedEvents = 32
)

// runRestartCommand runs argv (no shell) in the process's working
// directory with stdin from /dev/null, in its own process group, and
// returns its exit status as text and the first maxRestartOutput bytes of
// its combined output. At timeout the whole group is killed with SIGKILL;
// a daemon the command started in its own session (setsid) is not in the
// group and keeps running. err is non-nil when the command could not
// start, did not exit 0 or ran out of time.
func runRestartCommand(ctx context.Context, argv []string, timeout time.Duration) (status, output string, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out boundedBuffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Wait also waits for the output copy, which a grandchild holding the
	// pipe could keep open: bound it.
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	output = out.String()
	if len(output) > maxRestartOutput {
		output = output[:maxRestartOutput] + "\n[output cut at 4 KiB]"
	}
	switch {
	case cmd.ProcessState == nil:
		return "not started", output, fmt.Errorf("start %s: %w", argv[0], err)
	case ctx.Err() != nil:
		return fmt.Sprintf("killed after the %s bound (%s)", timeout, cmd.ProcessState), output, fmt.Errorf("%s ran longer than %s", argv[0], timeout)
	}
	return cmd.ProcessState.String(), output, err
}

// waitReady polls GET /_ping (each bounded by pingTimeout) until the
// Engine answers or timeout passes, and returns how long it took.
func waitReady(ctx context.Context, cli *client.Client, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, min(pingTimeout, time.Until(deadline)))
		_, err := cli.Ping(pctx, client.PingOptions{})
		cancel()
		if err == nil {
			return time.Since(start), nil
		}
		last = err
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Since(start), fmt.Errorf("no answer to /_ping within %s: %w", timeout, last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// eventWatch is a GET /events stream opened before a restart. A daemon
// that goes away ends it (EOF or a reset connection); a "restart" that
// leaves the daemon running leaves it open. It is how the scenario tells
// a restart from a command that restarted nothing, on any Engine: /info
// has no start time, and the daemon ID survives a restart by design.
type eventWatch struct {
	cancel context.CancelFunc
	opened time.Time
	done   chan struct{}

	mu sync.Mutex
	// unopened says the Engine never answered the stream's request.
	unopened bool
	events   []string
	count    int
	end      error
	endAt    time.Time
}

// streamOpenTimeout bounds the wait for the event stream's reply head.
const streamOpenTimeout = 30 * time.Second

// watchEvents opens the event stream on cli; stop must follow. An Engine
// that does not answer the stream's request within streamOpenTimeout
// leaves it unopened, which ended reports.
func watchEvents(ctx context.Context, cli *client.Client) *eventWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &eventWatch{cancel: cancel, opened: time.Now(), done: make(chan struct{})}
	// Events returns once the reply head arrived (or the request failed).
	results := make(chan client.EventsResult, 1)
	go func() { results <- cli.Events(ctx, client.EventsListOptions{}) }()
	var res client.EventsResult
	select {
	case res = <-results:
	case <-time.After(streamOpenTimeout):
		w.unopened = true
		cancel()
		res = <-results
	}
	go func() {
		defer close(w.done)
		for {
			select {
			case m := <-res.Messages:
				w.mu.Lock()
				w.count++
				if len(w.events) < maxWatchedEvents {
					id := m.Actor.ID
					if len(id) > 12 {
						id = id[:12]
					}
					w.events = append(w.events, fmt.Sprintf("%s %s %s", m.Type, m.Action, id))
				}
				w.mu.Unlock()
			case err := <-res.Err:
				w.mu.Lock()
				w.end, w.endAt = err, time.Now()
				if err == nil {
					w.end = errors.New("stream closed")
				}
				w.mu.Unlock()
				return
			}
		}
	}()
	return w
}

// ended waits up to grace for the stream's end and describes it: ok is
// true when the stream ended other than by the watcher's own cancel.
func (w *eventWatch) ended(grace time.Duration) (got string, ok bool) {
	select {
	case <-w.done:
	case <-time.After(grace):
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.unopened {
		return fmt.Sprintf("never opened: no reply to GET /events within %s", streamOpenTimeout), false
	}
	if w.end == nil {
		return fmt.Sprintf("still open %s after the Engine answered again", grace), false
	}
	if errors.Is(w.end, context.Canceled) {
		return "cancelled by the scenario", false
	}
	return fmt.Sprintf("ended %s after it opened: %v", w.endAt.Sub(w.opened).Round(time.Millisecond), w.end), true
}

// seen returns the events the stream carried (the first maxWatchedEvents)
// and how many there were.
func (w *eventWatch) seen() ([]string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string{}, w.events...), w.count
}

// stop cancels the stream and waits for its reader.
func (w *eventWatch) stop() {
	w.cancel()
	<-w.done
}

// checkArgv validates a restart command: a program and its arguments, no
// shell; each non-empty, without NUL, at most 4 KiB; at most 64 words.
func checkArgv(field string, argv []string) error {
	switch {
	case argv == nil:
		return nil
	case len(argv) == 0:
		return fmt.Errorf("params.%s: want a command as a list (program, then arguments), got an empty list", field)
	case len(argv) > 64:
		return fmt.Errorf("params.%s: at most 64 words, got %d", field, len(argv))
	}
	for i, a := range argv {
		switch {
		case a == "":
			return fmt.Errorf("params.%s[%d]: empty word", field, i)
		case strings.ContainsRune(a, 0):
			return fmt.Errorf("params.%s[%d]: contains NUL", field, i)
		case len(a) > 4<<10:
			return fmt.Errorf("params.%s[%d]: longer than 4 KiB", field, i)
		}
	}
	return nil
}

// workingDir is the directory a relative restart program resolves
// against, for the evidence.
func workingDir() string {
	d, err := os.Getwd()
	if err != nil {
		return "unknown: " + err.Error()
	}
	return d
}
