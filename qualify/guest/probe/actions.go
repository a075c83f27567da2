package main

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/qualbox/qualbox/qualify/guest/facts"
)

const mib = 1 << 20

func count(s, what string, max int64) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > max {
		return 0, fmt.Errorf("%s %q is not an integer in [0, %d]", what, s, max)
	}
	return n, nil
}

func seconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 30*24*3600 {
		return 0, fmt.Errorf("seconds %q is not a number in [0, 2592000]", s)
	}
	return time.Duration(f * float64(time.Second)), nil
}

func arity(args []string, min, max int) error {
	if len(args) < min || len(args) > max {
		return fmt.Errorf("want %d to %d arguments, got %d", min, max, len(args))
	}
	return nil
}

func finish(r *facts.Result, start time.Time, err error) *facts.Result {
	r.Outcome = outcome(err)
	r.ElapsedMillis = time.Since(start).Milliseconds()
	return r
}

// alloc allocates and touches <MiB> MiB one MiB at a time, printing a
// Progress line to stderr after each, then holds the memory for
// [holdSeconds] (default 0).
func alloc(args []string) (any, error) {
	if err := arity(args, 1, 2); err != nil {
		return nil, err
	}
	n, err := count(args[0], "MiB", 1<<20)
	if err != nil {
		return nil, err
	}
	var hold time.Duration
	if len(args) == 2 {
		if hold, err = seconds(args[1]); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	r := &facts.Result{Action: "alloc", Requested: n}
	chunks := make([][]byte, 0, n)
	for r.Done < n {
		c := make([]byte, mib)
		for i := 0; i < len(c); i += 4096 {
			c[i] = 1
		}
		chunks = append(chunks, c)
		r.Done++
		emit(os.Stderr, facts.Progress{Action: "alloc", Done: r.Done})
	}
	time.Sleep(hold)
	r.Seconds = hold.Seconds()
	finish(r, start, nil)
	r.Done = int64(len(chunks))
	return r, nil
}

// sleepCommand is what fork and spawn children run: busybox sleep when
// present (one process, no threads), else the probe itself.
func sleepCommand(d time.Duration) (string, []string) {
	secs := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	if _, err := os.Stat("/bin/sleep"); err == nil {
		return "/bin/sleep", []string{"sleep", secs}
	}
	return "/proc/self/exe", []string{"qualbox-probe", "sleep", secs}
}

func startChildren(r *facts.Result, n int64, d time.Duration, detach bool) (procs []*os.Process, err error) {
	name, argv := sleepCommand(d)
	attr := &os.ProcAttr{Files: []*os.File{nil, nil, nil}, Sys: &syscall.SysProcAttr{Setsid: detach}}
	for r.Done < n {
		p, err := os.StartProcess(name, argv, attr)
		if err != nil {
			return procs, err
		}
		procs = append(procs, p)
		r.PIDs = append(r.PIDs, p.Pid)
		r.Done++
	}
	return procs, nil
}

// fork starts <N> children that sleep [seconds] (default 30), stopping at the
// first failure (EAGAIN under a PID limit), then kills and reaps them.
func fork(args []string) (any, error) {
	if err := arity(args, 1, 2); err != nil {
		return nil, err
	}
	n, err := count(args[0], "N", 1<<16)
	if err != nil {
		return nil, err
	}
	d := 30 * time.Second
	if len(args) == 2 {
		if d, err = seconds(args[1]); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	r := &facts.Result{Action: "fork", Requested: n, Seconds: d.Seconds()}
	procs, err := startChildren(r, n, d, false)
	for _, p := range procs {
		_ = p.Kill()
		_, _ = p.Wait()
	}
	return finish(r, start, err), nil
}

// spawn starts <N> descendants in their own sessions that sleep <seconds>,
// and exits without waiting for them: they outlive the probe.
func spawn(args []string) (any, error) {
	if err := arity(args, 2, 2); err != nil {
		return nil, err
	}
	n, err := count(args[0], "N", 1<<16)
	if err != nil {
		return nil, err
	}
	d, err := seconds(args[1])
	if err != nil {
		return nil, err
	}
	start := time.Now()
	r := &facts.Result{Action: "spawn", Requested: n, Seconds: d.Seconds()}
	procs, err := startChildren(r, n, d, true)
	for _, p := range procs {
		_ = p.Release()
	}
	return finish(r, start, err), nil
}

// patternChunk is about 64 KiB of whole facts.WritePattern repetitions.
func patternChunk() []byte {
	p := facts.WritePattern
	return []byte(strings.Repeat(p, 64*1024/len(p)))
}

// write writes exactly <bytes> bytes of facts.WritePattern to the stream.
func write(args []string) (any, error) {
	if err := arity(args, 2, 2); err != nil {
		return nil, err
	}
	var f *os.File
	switch args[0] {
	case "stdout":
		f = os.Stdout
	case "stderr":
		f = os.Stderr
	default:
		return nil, fmt.Errorf("stream %q is not stdout or stderr", args[0])
	}
	n, err := count(args[1], "bytes", 1<<40)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	r := &facts.Result{Action: "write", Stream: args[0], Requested: n}
	h := sha256.New()
	chunk := patternChunk()
	// os.File.Write writes all of b or fails, so every write but a failed
	// one ends on a pattern boundary and the next chunk starts the pattern.
	for err == nil && r.Done < n {
		b := chunk[:min(int64(len(chunk)), n-r.Done)]
		var k int
		k, err = f.Write(b)
		h.Write(b[:k])
		r.Done += int64(k)
	}
	r.SHA256 = hex.EncodeToString(h.Sum(nil))
	return finish(r, start, err), nil
}

// echo copies stdin to stdout until EOF.
func echo(args []string) (any, error) {
	if err := noArgs(args); err != nil {
		return nil, err
	}
	start := time.Now()
	r := &facts.Result{Action: "echo"}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(os.Stdout, h), os.Stdin)
	r.Done = n
	r.SHA256 = hex.EncodeToString(h.Sum(nil))
	return finish(r, start, err), nil
}

func sleepAction(args []string) (any, error) {
	if err := arity(args, 1, 1); err != nil {
		return nil, err
	}
	d, err := seconds(args[0])
	if err != nil {
		return nil, err
	}
	start := time.Now()
	time.Sleep(d)
	return finish(&facts.Result{Action: "sleep", Seconds: d.Seconds()}, start, nil), nil
}

// fill creates or truncates <path> and writes up to <bytes> bytes of zeros
// in 64 KiB writes until an error (ENOSPC on a full tmpfs), then syncs.
func fill(args []string) (any, error) {
	if err := arity(args, 2, 2); err != nil {
		return nil, err
	}
	n, err := count(args[1], "bytes", 1<<50)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	r := &facts.Result{Action: "fill", Path: args[0], Requested: n}
	f, err := os.OpenFile(args[0], os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return finish(r, start, err), nil
	}
	buf := make([]byte, 64*1024)
	for err == nil && r.Done < n {
		var k int
		k, err = f.Write(buf[:min(int64(len(buf)), n-r.Done)])
		r.Done += int64(k)
	}
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	return finish(r, start, err), nil
}

// addressTimeout checks the arguments of an action on one address with
// an optional [timeoutSeconds] after it, and returns the timeout (default
// 3 s). A timeout of 0 is refused: to the net and http packages it means
// none, and a probe that can hang would stall its scenario instead of
// reporting.
func addressTimeout(args []string) (time.Duration, error) {
	if err := arity(args, 1, 2); err != nil {
		return 0, err
	}
	if len(args) == 1 {
		return 3 * time.Second, nil
	}
	d, err := seconds(args[1])
	if err == nil && d <= 0 {
		err = fmt.Errorf("timeout %q: want more than 0 seconds", args[1])
	}
	return d, err
}

// connect dials TCP <host:port> with [timeoutSeconds] (default 3).
func connect(args []string) (any, error) {
	timeout, err := addressTimeout(args)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	r := &facts.Result{Action: "connect", Address: args[0]}
	c, err := net.DialTimeout("tcp", args[0], timeout)
	if err == nil {
		_ = c.Close()
	}
	return finish(r, start, err), nil
}

// httpGet sends GET <url> with [timeoutSeconds] (default 3) for the whole
// exchange, following no redirect and using no proxy from the
// environment, and records the reply's status, Api-Version and Server
// headers and the first 64 bytes of its body. An https URL is fetched
// without verifying the server's certificate and without a client
// certificate: the question is whether a workload can use the service,
// and an unauthenticated workload would not verify either.
func httpGet(args []string) (any, error) {
	timeout, err := addressTimeout(args)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	r := &facts.Result{Action: "http", Address: args[0]}
	c := &http.Client{
		Timeout:       timeout,
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := c.Get(args[0])
	if err != nil {
		return finish(r, start, err), nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64))
	r.HTTP = &facts.HTTPReply{Status: resp.StatusCode, APIVersion: resp.Header.Get("Api-Version"), Server: resp.Header.Get("Server"), Body: string(body)}
	return finish(r, start, err), nil
}
