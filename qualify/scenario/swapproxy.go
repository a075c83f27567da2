package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// swapProxy is a scenario-owned Unix socket proxy between the driver and
// the Engine that forwards everything unchanged except the body of a
// successful GET .../archive (an export), which it replaces with a crafted
// archive while keeping the Engine's headers (the path stat the driver
// compares). The driver's validator then sees exactly what a hostile Engine
// or workspace volume could send. qualify/faultproxy replaces replies only
// with JSON error bodies, hence this small proxy.
type swapProxy struct {
	dir     string
	socket  string
	srv     *http.Server
	mu      sync.Mutex
	body    []byte
	swapped int
}

// newSwapProxy listens on a socket in a fresh short directory (Unix socket
// paths are limited to 107 bytes) and forwards to upstream, the Engine's
// "unix:///abs/path".
func newSwapProxy(upstream string) (*swapProxy, error) {
	upstream = strings.TrimPrefix(upstream, "unix://")
	if !filepath.IsAbs(upstream) {
		return nil, fmt.Errorf("swap proxy: upstream %q is not an absolute Unix socket path", upstream)
	}
	dir, err := os.MkdirTemp("", "qualbox-swap-")
	if err != nil {
		return nil, err
	}
	p := &swapProxy{dir: dir, socket: filepath.Join(dir, "engine.sock")}
	ln, err := net.Listen("unix", p.socket)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker" },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", upstream)
		}},
		FlushInterval:  -1,
		ErrorLog:       log.New(io.Discard, "", 0),
		ModifyResponse: p.modify,
	}
	p.srv = &http.Server{Handler: rp}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *swapProxy) modify(resp *http.Response) error {
	if resp.Request.Method != http.MethodGet || !strings.HasSuffix(resp.Request.URL.Path, "/archive") || resp.StatusCode != http.StatusOK {
		return nil
	}
	p.mu.Lock()
	body := p.body
	if body != nil {
		p.swapped++
	}
	p.mu.Unlock()
	if body == nil {
		return nil
	}
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", fmt.Sprint(len(body)))
	return nil
}

// Endpoint returns "unix://" + the proxy's socket.
func (p *swapProxy) Endpoint() string { return "unix://" + p.socket }

// set makes the proxy answer every export GET with body (nil: pass through).
func (p *swapProxy) set(body []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.body = body
}

// count returns how many export bodies were replaced so far.
func (p *swapProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.swapped
}

// Close stops the proxy and removes its directory.
func (p *swapProxy) Close() error {
	err := p.srv.Close()
	if rerr := os.RemoveAll(p.dir); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}
