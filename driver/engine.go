package driver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/sandboxapi"
)

// MaxControlResponseBytes bounds every buffered Engine control response
// (JSON replies such as /info or container inspect). Streaming transfers and
// hijacked exec streams are bounded separately.
const MaxControlResponseBytes = 1 << 20

// maxResponseHeaderBytes bounds the Engine's HTTP response headers.
const maxResponseHeaderBytes = 16 << 10

// ResponseLimitError reports an Engine reply larger than its bound.
type ResponseLimitError struct {
	Method, Path string
	Limit        int64
}

func (e *ResponseLimitError) Error() string {
	return fmt.Sprintf("engine response to %s %s exceeds %d bytes", e.Method, e.Path, e.Limit)
}

// streamingKey marks a request context whose response body is a stream the
// caller bounds itself (archive transfers).
type streamingKey struct{}

func withStreaming(ctx context.Context) context.Context {
	return context.WithValue(ctx, streamingKey{}, true)
}

// boundedTransport caps control response bodies. The moby client decodes
// replies with json.Decoder over the whole body, so without this cap a
// misbehaving Engine (or a proxy in front of it) could make the controller
// buffer without limit.
type boundedTransport struct {
	base http.RoundTripper
}

// observeKey marks a request whose connection and response head must each
// be observed within a bound (a time.Duration) although its body is not
// bounded: transfers (docs/contract.md#workspace-files).
type observeKey struct{}

// withObservation bounds the connection and the response head of requests
// made with ctx by d each; the upload body itself stays unbounded, and the
// response head bound starts once the whole body was sent (the upload's
// acknowledgement).
func withObservation(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, observeKey{}, d)
}

// ObservationError reports an Engine connection or response head that did
// not arrive within its bound. It unwraps to context.DeadlineExceeded, so
// the driver reports it as deadline_exceeded.
type ObservationError struct {
	// What is "connection" or "response head".
	What  string
	Bound time.Duration
}

func (e *ObservationError) Error() string {
	return fmt.Sprintf("engine %s not observed within %v", e.What, e.Bound)
}

func (e *ObservationError) Unwrap() error { return context.DeadlineExceeded }

// observe runs req with a timer armed for the connection (until one is
// obtained) and again for the response head (from the moment the request,
// body included, is written until the head arrives).
func (t *boundedTransport) observe(req *http.Request, d time.Duration) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	var mu sync.Mutex
	var timer *time.Timer
	arm := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		if timer != nil {
			timer.Stop()
		}
		if what != "" {
			timer = time.AfterFunc(d, func() { cancel(&ObservationError{What: what, Bound: d}) })
		}
	}
	arm("connection")
	trace := &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { arm("") },
		WroteRequest: func(httptrace.WroteRequestInfo) { arm("response head") },
	}
	resp, err := t.base.RoundTrip(req.WithContext(httptrace.WithClientTrace(ctx, trace)))
	arm("")
	if err != nil {
		var oe *ObservationError
		if errors.As(context.Cause(ctx), &oe) {
			err = oe
		}
		cancel(nil)
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: func() { cancel(nil) }}
	return resp, nil
}

// cancelOnClose releases an observed request's context with its body.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if d, ok := req.Context().Value(observeKey{}).(time.Duration); ok {
		resp, err := t.observe(req, d)
		if err != nil || resp.StatusCode == http.StatusSwitchingProtocols || req.Context().Value(streamingKey{}) != nil {
			return resp, err
		}
		return t.limit(req, resp)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode == http.StatusSwitchingProtocols {
		return resp, err
	}
	if req.Context().Value(streamingKey{}) != nil {
		return resp, nil
	}
	return t.limit(req, resp)
}

// limit applies MaxControlResponseBytes to a control reply's body.
func (t *boundedTransport) limit(req *http.Request, resp *http.Response) (*http.Response, error) {
	if resp.ContentLength > MaxControlResponseBytes {
		resp.Body.Close()
		return nil, &ResponseLimitError{Method: req.Method, Path: req.URL.Path, Limit: MaxControlResponseBytes}
	}
	resp.Body = &limitedBody{rc: resp.Body, left: MaxControlResponseBytes, method: req.Method, path: req.URL.Path}
	return resp, nil
}

type limitedBody struct {
	rc           io.ReadCloser
	left         int64
	method, path string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// Probe for one more byte to tell an exact-size body from an oversize one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, &ResponseLimitError{Method: b.method, Path: b.path, Limit: MaxControlResponseBytes}
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// engine is one explicit Engine endpoint: a moby client whose transport
// dials only the configured Unix socket and bounds control replies, plus a
// raw HTTP client on the same transport for the few replies the moby client
// flattens (exec inspect's nullable ExitCode).
type engine struct {
	socket string
	cli    *client.Client
	raw    *http.Client
	dial   func(ctx context.Context) (net.Conn, error)
	base   *http.Transport
	// reads coalesces concurrent admissions' /version and /info reads.
	reads daemonReadGroup
}

// socketPath accepts "unix:///abs/path" or "/abs/path" and returns the
// canonical absolute socket path.
func socketPath(endpoint string) (string, error) {
	p := endpoint
	if strings.HasPrefix(endpoint, "unix://") {
		p = strings.TrimPrefix(endpoint, "unix://")
	} else if strings.Contains(endpoint, "://") {
		return "", fmt.Errorf("endpoint %q: only unix:// sockets are admitted", endpoint)
	}
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || path.Clean(p) != p {
		return "", fmt.Errorf("endpoint %q: socket path must be absolute and canonical", endpoint)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("endpoint %q: socket path contains a control character", endpoint)
		}
	}
	return p, nil
}

// newEngine returns an engine on socket whose client speaks exactly
// apiVersion ("1.<minor>") on every request: no negotiation, so the API the
// profile was qualified against is the API in use
// (docs/contract.md#profiles-and-admission).
func newEngine(socket, apiVersion string) (*engine, error) {
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	base := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		},
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		DisableCompression:     true,
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        30 * time.Second,
	}
	hc := &http.Client{Transport: &boundedTransport{base: base}, CheckRedirect: client.CheckRedirect}
	cli, err := client.New(
		client.WithHost("unix://"+socket),
		client.WithHTTPClient(hc),
		client.WithUserAgent("qualbox-driver"),
		client.WithAPIVersion(apiVersion),
	)
	if err != nil {
		return nil, err
	}
	dial := func(ctx context.Context) (net.Conn, error) { return dialer.DialContext(ctx, "unix", socket) }
	return &engine{socket: socket, cli: cli, raw: hc, dial: dial, base: base}, nil
}

// close closes the idle connections. The moby client only closes those of
// a transport it can see as *http.Transport, and ours is wrapped by
// boundedTransport, so without this each idle connection kept two
// goroutines and a socket until IdleConnTimeout after Backend.Close.
func (e *engine) close() error {
	e.base.CloseIdleConnections()
	return e.cli.Close()
}

// getJSON performs a bounded GET of an Engine API path (without version
// prefix) and decodes a 200 reply into out. It returns the status code; a
// 404 is returned as (404, nil) so callers can treat absence explicitly.
func (e *engine) getJSON(ctx context.Context, apiPath string, out any) (int, error) {
	return e.get(ctx, "/v"+e.cli.ClientVersion()+apiPath, out)
}

// getUnversioned is getJSON without the version prefix: the daemon answers
// at its default API version. Admission uses it only to report a daemon
// that does not serve the pinned version.
func (e *engine) getUnversioned(ctx context.Context, apiPath string, out any) (int, error) {
	return e.get(ctx, apiPath, out)
}

func (e *engine) get(ctx context.Context, fullPath string, out any) (int, error) {
	apiPath := fullPath
	u := url.URL{Scheme: "http", Host: client.DummyHost, Path: fullPath}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := e.raw.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, fmt.Errorf("engine GET %s: HTTP %d: %s", apiPath, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("engine GET %s: invalid JSON: %w", apiPath, err)
	}
	return resp.StatusCode, nil
}

// engineFailure converts an Engine or transport error into the contract's
// OperationError, keeping the cause: context errors become cancelled or
// deadline_exceeded, everything else driver_failure.
func engineFailure(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var op *sandboxapi.OperationError
	if errors.As(err, &op) {
		return err
	}
	msg := fmt.Sprintf(format, args...)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &sandboxapi.OperationError{Code: sandboxapi.CodeDeadlineExceeded, Message: msg, Err: err}
	case errors.Is(err, context.Canceled):
		return &sandboxapi.OperationError{Code: sandboxapi.CodeCancelled, Message: msg, Err: err}
	}
	return &sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: msg, Err: err}
}

func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

func isConflict(err error) bool { return cerrdefs.IsConflict(err) }

// MaxUpgradeHeadBytes bounds the exec start reply head (status line and
// headers) the driver accepts before the multiplexed stream begins
// (docs/contract.md#processes-and-streams).
const MaxUpgradeHeadBytes = 64 << 10

// startExec starts execID attached (POST /exec/{id}/start upgraded to a raw
// stream) and returns the connection and the stream reader. It is our own
// rather than the moby client's ExecAttach because that reads the upgrade
// head without a bound: a head over MaxUpgradeHeadBytes here fails with a
// stream_failure *sandboxapi.OperationError and nothing beyond the bound
// is read. Any status but 101 is a driver_failure; ctx bounds the dial and
// the head, not the stream.
func (e *engine) startExec(ctx context.Context, execID string) (net.Conn, io.Reader, error) {
	conn, err := e.dial(ctx)
	if err != nil {
		return nil, nil, engineFailure(err, "connect to Engine at %s for exec %s", e.socket, execID)
	}
	ok := false
	defer func() {
		if !ok {
			conn.Close()
		}
	}()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	u := url.URL{Scheme: "http", Host: client.DummyHost, Path: "/v" + e.cli.ClientVersion() + "/exec/" + execID + "/start"}
	req, err := http.NewRequest(http.MethodPost, u.String(), strings.NewReader(`{"Detach":false,"Tty":false}`))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	req.Header.Set("User-Agent", "qualbox-driver")
	fail := func(err error, format string, args ...any) error {
		if ctx.Err() != nil {
			return engineFailure(ctx.Err(), format, args...)
		}
		return &sandboxapi.OperationError{Code: sandboxapi.CodeStreamFailure, Message: fmt.Sprintf(format, args...), Err: err}
	}
	if err := req.Write(conn); err != nil {
		return nil, nil, fail(err, "send exec %s start", execID)
	}
	lr := &io.LimitedReader{R: conn, N: MaxUpgradeHeadBytes}
	br := bufio.NewReaderSize(lr, 4096)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		if lr.N == 0 {
			return nil, nil, fail(err, "exec %s start reply head exceeds %d bytes", execID, MaxUpgradeHeadBytes)
		}
		return nil, nil, fail(err, "read exec %s start reply head", execID)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, nil, &sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure,
			Message: fmt.Sprintf("exec %s start: Engine answered HTTP %d, want 101: %s", execID, resp.StatusCode, strings.TrimSpace(string(body)))}
	}
	// Stream bytes that arrived with the head stay first; the rest comes
	// straight from the connection, no longer under the head bound.
	early, _ := br.Peek(br.Buffered())
	early = bytes.Clone(early)
	if !stop() {
		return nil, nil, engineFailure(ctx.Err(), "start exec %s", execID)
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, nil, fail(err, "start exec %s", execID)
	}
	ok = true
	return conn, io.MultiReader(bytes.NewReader(early), conn), nil
}
