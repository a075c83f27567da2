package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
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

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode == http.StatusSwitchingProtocols {
		return resp, err
	}
	if req.Context().Value(streamingKey{}) != nil {
		return resp, nil
	}
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
	base   *http.Transport
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
	return &engine{socket: socket, cli: cli, raw: hc, base: base}, nil
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
	version := e.cli.ClientVersion()
	u := url.URL{Scheme: "http", Host: client.DummyHost, Path: "/v" + version + apiPath}
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
