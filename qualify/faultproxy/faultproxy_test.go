package faultproxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/faultproxy"
)

// shortDir returns a fresh directory with a short path: t.TempDir embeds
// the test name and can exceed the Unix socket path limit.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fp")
	assert.NilError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// fake is a small Engine stand-in on a Unix socket: POST /vX/items counts
// effects and echoes the body length, GET /vX/echo answers "hello" with an
// X-Fake-Stat header, and
// POST /vX/exec/{id}/start upgrades, writes 100 bytes and echoes stdin.
type fake struct {
	socket  string
	effects atomic.Int64
	conns   atomic.Int64
	srv     *http.Server
}

func newFake(t *testing.T) *fake {
	t.Helper()
	f := &fake{socket: filepath.Join(shortDir(t), "fake.sock")}
	ln, err := net.Listen("unix", f.socket)
	assert.NilError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1.41/echo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Fake-Stat", "e30=")
		fmt.Fprint(w, "hello")
	})
	mux.HandleFunc("POST /v1.41/items", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		f.effects.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"length":%d}`, n)
	})
	mux.HandleFunc("POST /v1.41/exec/{id}/start", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(brw, "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
		brw.WriteString(strings.Repeat("0123456789", 10))
		if brw.Flush() != nil {
			return
		}
		_, _ = io.Copy(conn, brw)
	})
	f.srv = &http.Server{Handler: mux, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}}
	go f.srv.Serve(ln)
	t.Cleanup(func() { f.srv.Close() })
	return f
}

func newProxy(t *testing.T, upstream string, rules ...faultproxy.Rule) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(shortDir(t), upstream, rules...)
	assert.NilError(t, err)
	t.Cleanup(func() { assert.Check(t, p.Close()) })
	return p
}

func httpClient(p *faultproxy.Proxy) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", p.Socket())
		},
	}}
}

func post(t *testing.T, c *http.Client, body io.Reader) (string, error) {
	t.Helper()
	resp, err := c.Post("http://docker/v1.41/items", "application/json", body)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b), err
}

func TestAPIPath(t *testing.T) {
	for in, want := range map[string]string{
		"/v1.41/containers/create?name=x": "/containers/create",
		"/v1.52/exec/abc/start":           "/exec/abc/start",
		"/_ping":                          "/_ping",
		"/v1.41":                          "/",
		"/v1x/containers":                 "/v1x/containers",
	} {
		assert.Check(t, is.Equal(faultproxy.APIPath(in), want), in)
	}
}

func TestForwardKeepAliveAndChunkedBodies(t *testing.T) {
	f := newFake(t)
	p := newProxy(t, f.socket)
	c := httpClient(p)
	for range 3 {
		got, err := post(t, c, strings.NewReader("abc"))
		assert.NilError(t, err)
		assert.Check(t, is.Equal(got, `201 {"length":3}`))
	}
	// An unknown-length body goes out chunked and arrives whole.
	pr, pw := io.Pipe()
	go func() {
		for range 100 {
			pw.Write([]byte(strings.Repeat("x", 1000)))
		}
		pw.Close()
	}()
	got, err := post(t, c, pr)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(got, `201 {"length":100000}`))
	assert.Check(t, is.Equal(f.conns.Load(), int64(1)), "keep-alive reuses one Engine connection")
	seen := p.Seen()
	assert.Assert(t, is.Len(seen, 4))
	assert.Check(t, is.Equal(seen[3].Path, "/items"))
	assert.Check(t, is.Equal(seen[3].Status, 201))
	assert.Check(t, is.Equal(seen[3].Action, faultproxy.ActionForward))
}

func TestDropReplyForwardsButNeverAnswers(t *testing.T) {
	f := newFake(t)
	p := newProxy(t, f.socket, faultproxy.DropReply(faultproxy.Request("POST", "/items").Nth(2)))
	c := httpClient(p)
	_, err := post(t, c, strings.NewReader("a"))
	assert.NilError(t, err)
	_, err = post(t, c, strings.NewReader("b"))
	assert.Check(t, err != nil, "the second reply is dropped")
	_, err = post(t, c, strings.NewReader("c"))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(f.effects.Load(), int64(3)), "every request reached the Engine")
	fired := p.Fired()
	assert.Assert(t, is.Len(fired, 1))
	assert.Check(t, is.Equal(fired[0].Seq, 2))
	assert.Check(t, is.Equal(fired[0].Status, 201), "the Engine's reply was read")
	assert.Check(t, is.Equal(fired[0].ClientStatus, 0), "and never sent")
	assert.Check(t, is.Equal(fired[0].Action, faultproxy.ActionDropReply))
}

func TestSeverAfterFault(t *testing.T) {
	f := newFake(t)
	p := newProxy(t, f.socket, faultproxy.DropReply(faultproxy.Request("POST", "/items").Nth(2)))
	p.SeverAfterFault()
	c := httpClient(p)
	_, err := post(t, c, strings.NewReader("a"))
	assert.NilError(t, err)
	_, err = post(t, c, strings.NewReader("b"))
	assert.Check(t, err != nil)
	_, err = post(t, c, strings.NewReader("c"))
	assert.Check(t, err != nil, "severed after the fault")
	assert.Check(t, is.Equal(f.effects.Load(), int64(2)), "refused requests never reach the Engine")
	seen := p.Seen()
	assert.Assert(t, is.Len(seen, 3))
	assert.Check(t, is.Equal(seen[2].Action, faultproxy.ActionRefused))
	assert.Check(t, is.Len(p.Fired(), 1))
	p.SetRules()
	_, err = post(t, c, strings.NewReader("d"))
	assert.NilError(t, err, "SetRules lifts the severance")
}

func TestDelay(t *testing.T) {
	f := newFake(t)
	p := newProxy(t, f.socket, faultproxy.Delay(faultproxy.Request("GET", "/echo"), 300*time.Millisecond))
	start := time.Now()
	resp, err := httpClient(p).Get("http://docker/v1.41/echo")
	assert.NilError(t, err)
	resp.Body.Close()
	assert.Check(t, time.Since(start) >= 300*time.Millisecond)
}

func TestReplaceReplyAndAnswer(t *testing.T) {
	f := newFake(t)
	p := newProxy(t, f.socket,
		faultproxy.ReplaceReply(faultproxy.Request("POST", "/items").Nth(1), 409, "removal already in progress"),
		faultproxy.Answer(faultproxy.Request("POST", "/items").Nth(2), 404, "no such item"),
	)
	c := httpClient(p)
	got, err := post(t, c, strings.NewReader("a"))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(got, "409 {\"message\":\"removal already in progress\"}\n"))
	assert.Check(t, is.Equal(f.effects.Load(), int64(1)), "a replaced reply was forwarded")
	got, err = post(t, c, strings.NewReader("b"))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(got, "404 {\"message\":\"no such item\"}\n"))
	assert.Check(t, is.Equal(f.effects.Load(), int64(1)), "an answered request is not forwarded")
	seen := p.Seen()
	assert.Assert(t, is.Len(seen, 2))
	assert.Check(t, is.Equal(seen[0].Status, 201))
	assert.Check(t, is.Equal(seen[0].ClientStatus, 409))
	assert.Check(t, is.Equal(seen[1].Status, 0))
	assert.Check(t, is.Equal(seen[1].ClientStatus, 404))
}

func TestReplaceBodyKeepsTheEngineHead(t *testing.T) {
	f := newFake(t)
	body := []byte("\x00binary\xffbody")
	p := newProxy(t, f.socket, faultproxy.ReplaceBody(faultproxy.Request("GET", "/(echo|missing)"), "application/x-tar", body))
	c := httpClient(p)
	for range 2 { // keep-alive: the connection stays usable after a swap
		resp, err := c.Get("http://docker/v1.41/echo")
		assert.NilError(t, err)
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.NilError(t, err)
		assert.Check(t, is.Equal(resp.StatusCode, 200))
		assert.Check(t, is.DeepEqual(got, body))
		assert.Check(t, is.Equal(resp.Header.Get("X-Fake-Stat"), "e30="), "the Engine's headers are kept")
		assert.Check(t, is.Equal(resp.Header.Get("Content-Type"), "application/x-tar"))
		assert.Check(t, is.Equal(resp.ContentLength, int64(len(body))))
	}
	resp, err := c.Get("http://docker/v1.41/missing")
	assert.NilError(t, err)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Check(t, is.Equal(resp.StatusCode, 404))
	assert.Check(t, !strings.Contains(string(got), "binary"), "a non-2xx reply passes unchanged: %q", got)
	assert.Check(t, is.Equal(f.conns.Load(), int64(1)))
	seen := p.Seen()
	assert.Assert(t, is.Len(seen, 3))
	for _, e := range seen[:2] {
		assert.Check(t, is.Equal(e.Action, faultproxy.ActionReplaceReply))
		assert.Check(t, is.Equal(e.Status, 200))
		assert.Check(t, is.Equal(e.ClientStatus, 200))
		assert.Check(t, is.Equal(e.Rule, `replace-reply GET /(echo|missing) with a 12-byte application/x-tar body`))
	}
	assert.Check(t, is.Equal(seen[2].Action, faultproxy.ActionForward))
	assert.Check(t, is.Equal(seen[2].Rule, ""))
	assert.Check(t, is.Equal(seen[2].ClientStatus, 404))
	assert.Check(t, is.Len(p.Fired(), 2))
}

// upgrade sends an exec start with upgrade headers on a raw connection and
// returns the connection after the 101 head.
func upgrade(t *testing.T, p *faultproxy.Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("unix", p.Socket())
	assert.NilError(t, err)
	t.Cleanup(func() { conn.Close() })
	body := `{"Detach":false,"Tty":false}`
	fmt.Fprintf(conn, "POST /v1.41/exec/e1/start HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	assert.NilError(t, err)
	assert.Assert(t, is.Equal(resp.StatusCode, http.StatusSwitchingProtocols))
	return conn, br
}

func TestUpgradePipesBothWays(t *testing.T) {
	f := newFake(t)
	p := newProxy(t, f.socket)
	conn, br := upgrade(t, p)
	head := make([]byte, 100)
	_, err := io.ReadFull(br, head)
	assert.NilError(t, err)
	_, err = conn.Write([]byte("stdin bytes"))
	assert.NilError(t, err)
	assert.NilError(t, conn.(*net.UnixConn).CloseWrite())
	rest, err := io.ReadAll(br)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(string(rest), "stdin bytes"))
	seen := p.Seen()
	assert.Assert(t, is.Len(seen, 1))
	assert.Check(t, seen[0].Upgraded)
	assert.Check(t, is.Equal(seen[0].StreamBytes, int64(111)))
}

func TestCutStream(t *testing.T) {
	f := newFake(t)
	p := newProxy(t, f.socket, faultproxy.CutStream(faultproxy.Request("POST", `/exec/[^/]+/start`), 15))
	_, br := upgrade(t, p)
	got, err := io.ReadAll(br)
	assert.Check(t, err == nil || !strings.Contains(err.Error(), "timeout"), "%v", err)
	assert.Check(t, is.Equal(string(got), "012345678901234"))
}

func TestDropReplyOnUpgrade(t *testing.T) {
	f := newFake(t)
	p := newProxy(t, f.socket, faultproxy.DropReply(faultproxy.Request("POST", `/exec/[^/]+/start`)))
	conn, err := net.Dial("unix", p.Socket())
	assert.NilError(t, err)
	defer conn.Close()
	fmt.Fprint(conn, "POST /v1.41/exec/e1/start HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n")
	got, _ := io.ReadAll(conn)
	assert.Check(t, is.Len(got, 0), "nothing of the 101 reaches the client")
	assert.Check(t, is.Equal(p.Seen()[0].Status, 101))
}

func TestCloseStopsAndRemovesSocket(t *testing.T) {
	f := newFake(t)
	p, err := faultproxy.New(shortDir(t), f.socket)
	assert.NilError(t, err)
	// An open upgraded stream must not keep Close waiting.
	var wg sync.WaitGroup
	conn, _ := upgrade(t, p)
	wg.Add(1)
	go func() { defer wg.Done(); io.Copy(io.Discard, conn) }()
	assert.NilError(t, p.Close())
	assert.NilError(t, p.Close(), "Close is idempotent")
	wg.Wait()
	_, err = os.Stat(p.Socket())
	assert.Check(t, os.IsNotExist(err), "socket removed: %v", err)
	_, err = net.Dial("unix", p.Socket())
	assert.Check(t, err != nil)
}

func TestNewRejectsLongSocketPaths(t *testing.T) {
	_, err := faultproxy.New("/tmp/"+strings.Repeat("d", 120), "/var/run/docker.sock")
	assert.ErrorContains(t, err, "Unix sockets allow")
	_, err = faultproxy.New(shortDir(t), "relative.sock")
	assert.ErrorContains(t, err, "absolute")
}

func TestDropRequestNeverReachesTheEngine(t *testing.T) {
	f := newFake(t)
	p := newProxy(t, f.socket, faultproxy.DropRequest(faultproxy.Request("POST", "/items").Nth(1)))
	c := httpClient(p)
	_, err := post(t, c, strings.NewReader("a"))
	assert.Check(t, err != nil, "no reply to the dropped request")
	got, err := post(t, c, strings.NewReader("b"))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(got, `201 {"length":1}`))
	assert.Check(t, is.Equal(f.effects.Load(), int64(1)), "only the second request reached the Engine")
	fired := p.Fired()
	assert.Assert(t, is.Len(fired, 1))
	assert.Check(t, is.Equal(fired[0].Action, faultproxy.ActionDropRequest))
	assert.Check(t, is.Equal(fired[0].Status, 0))
	assert.Check(t, is.Equal(fired[0].ClientStatus, 0))
}

func TestRewriteRequestAndReply(t *testing.T) {
	f := newFake(t)
	double := func(b []byte) ([]byte, error) { return append(b, b...), nil }
	p := newProxy(t, f.socket,
		faultproxy.RewriteRequest(faultproxy.Request("POST", "/items"), double),
		faultproxy.RewriteReply(faultproxy.Request("GET", "/(echo|missing)"), func(b []byte) ([]byte, error) {
			return []byte(strings.ToUpper(string(b))), nil
		}))
	c := httpClient(p)
	// The Engine sees the rewritten body, also when it was sent chunked.
	got, err := post(t, c, strings.NewReader("abc"))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(got, `201 {"length":6}`))
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("xy"))
		pw.Close()
	}()
	got, err = post(t, c, pr)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(got, `201 {"length":4}`))
	resp, err := c.Get("http://docker/v1.41/echo")
	assert.NilError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Check(t, is.Equal(string(body), "HELLO"))
	assert.Check(t, is.Equal(resp.Header.Get("X-Fake-Stat"), "e30="), "the Engine's headers are kept")
	resp, err = c.Get("http://docker/v1.41/missing")
	assert.NilError(t, err)
	resp.Body.Close()
	assert.Check(t, is.Equal(resp.StatusCode, 404))
	assert.Check(t, is.Equal(f.conns.Load(), int64(1)), "keep-alive survives both rewrites")
	seen := p.Seen()
	assert.Assert(t, is.Len(seen, 4))
	assert.Check(t, is.Equal(seen[0].Action, faultproxy.ActionRewriteRequest))
	assert.Check(t, is.Equal(seen[2].Action, faultproxy.ActionRewriteReply))
	assert.Check(t, is.Equal(seen[2].ClientStatus, 200))
	assert.Check(t, is.Equal(seen[3].Action, faultproxy.ActionForward), "a non-2xx reply passes unchanged")

	// A failing rewrite fails the exchange; nothing reaches the Engine.
	p.SetRules(faultproxy.RewriteRequest(faultproxy.Request("POST", "/items"), func([]byte) ([]byte, error) { return nil, io.ErrUnexpectedEOF }))
	_, err = post(t, c, strings.NewReader("z"))
	assert.Check(t, err != nil)
	assert.Check(t, is.Equal(f.effects.Load(), int64(2)))
	assert.Check(t, is.Contains(p.Seen()[4].Err, "rewrite request: unexpected EOF"))
}
