package faultproxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxSocketPath is the longest Unix socket path Linux accepts (sun_path is
// 108 bytes including the terminating NUL).
const maxSocketPath = 107

var versionPrefix = regexp.MustCompile(`^/v[0-9]+\.[0-9]+(/|$)`)

// APIPath strips a "/vX.Y" version prefix and the query from a request
// path: "/v1.41/containers/create?name=x" becomes "/containers/create".
func APIPath(p string) string {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	if loc := versionPrefix.FindStringIndex(p); loc != nil {
		return "/" + p[loc[1]:]
	}
	return p
}

// Match selects requests by method and unversioned path. The zero Match
// matches nothing; build one with Request.
type Match struct {
	method string
	path   *regexp.Regexp
	nth    int
}

// Request matches method (exact, e.g. "POST") and pathPattern, a regular
// expression anchored at both ends and matched against the unversioned
// path without query, e.g. `/containers/[^/]+/start`. It panics on an
// invalid pattern, like regexp.MustCompile.
func Request(method, pathPattern string) Match {
	return Match{method: method, path: regexp.MustCompile("^(?:" + pathPattern + ")$")}
}

// Nth restricts m to the n-th matching request (1-based) seen by the rule
// since it was installed. Without Nth every matching request is selected.
func (m Match) Nth(n int) Match {
	m.nth = n
	return m
}

func (m Match) String() string {
	if m.path == nil {
		return "(nothing)"
	}
	s := m.method + " " + strings.TrimSuffix(strings.TrimPrefix(m.path.String(), "^(?:"), ")$")
	if m.nth > 0 {
		s += " #" + strconv.Itoa(m.nth)
	}
	return s
}

func (m Match) matches(method, apiPath string) bool {
	return m.path != nil && method == m.method && m.path.MatchString(apiPath)
}

// Action names what the proxy did with one request.
type Action string

// Actions recorded in Exchange.Action.
const (
	ActionForward      Action = "forward"
	ActionDropReply    Action = "drop-reply"
	ActionDelay        Action = "delay"
	ActionCutStream    Action = "cut-stream"
	ActionReplaceReply Action = "replace-reply"
	ActionAnswer       Action = "answer"
	// ActionRefused: the proxy was severed; the connection was closed
	// without forwarding.
	ActionRefused Action = "refused"
	// ActionDropRequest: the connection was closed without forwarding; the
	// Engine never saw the request.
	ActionDropRequest Action = "drop-request"
	// ActionRewriteRequest: the request body was rewritten before it was
	// forwarded.
	ActionRewriteRequest Action = "rewrite-request"
	// ActionRewriteReply: the Engine's 2xx reply body was rewritten before
	// the client got it.
	ActionRewriteReply Action = "rewrite-reply"
)

// Rule is one fault: a Match and what to do with the selected requests.
type Rule struct {
	match  Match
	action Action
	delay  time.Duration
	after  int64
	status int
	body   string
	// raw and contentType: ReplaceBody's body and its media type.
	raw         []byte
	contentType string
	rawBody     bool
	// rewrite: RewriteRequest's and RewriteReply's body transformation.
	rewrite func([]byte) ([]byte, error)
}

func (r Rule) String() string {
	switch r.action {
	case ActionDelay:
		return fmt.Sprintf("%s %s %v", r.action, r.match, r.delay)
	case ActionCutStream:
		return fmt.Sprintf("%s %s after %d bytes", r.action, r.match, r.after)
	case ActionReplaceReply, ActionAnswer:
		if r.rawBody {
			return fmt.Sprintf("%s %s with a %d-byte %s body", r.action, r.match, len(r.raw), r.contentType)
		}
		return fmt.Sprintf("%s %s with %d", r.action, r.match, r.status)
	}
	return fmt.Sprintf("%s %s", r.action, r.match)
}

// DropReply forwards selected requests to the Engine, reads the Engine's
// whole reply (for an upgrade: its 101 head), then closes the client
// connection without sending any of it.
func DropReply(m Match) Rule { return Rule{match: m, action: ActionDropReply} }

// Delay holds selected requests for d before forwarding them.
func Delay(m Match, d time.Duration) Rule { return Rule{match: m, action: ActionDelay, delay: d} }

// CutStream forwards selected requests; when the Engine upgrades the
// connection (101) it pipes both ways and closes both connections once
// afterBytes bytes of the Engine's stream (after the 101 head) reached the
// client. A selected request that is not upgraded passes unchanged.
func CutStream(m Match, afterBytes int64) Rule {
	return Rule{match: m, action: ActionCutStream, after: afterBytes}
}

// ReplaceReply forwards selected requests, reads and discards the Engine's
// reply and answers the client with status and a JSON body
// {"message": message} instead.
func ReplaceReply(m Match, status int, message string) Rule {
	return Rule{match: m, action: ActionReplaceReply, status: status, body: message}
}

// ReplaceBody forwards selected requests, reads and discards the Engine's
// reply body and, when the Engine answered 2xx, sends the client the
// Engine's status and headers (for example an archive GET's
// X-Docker-Container-Path-Stat) with body instead, its Content-Type set to
// contentType and its Content-Length to len(body). The exchange is recorded
// as ActionReplaceReply. A non-2xx reply passes unchanged and is recorded
// as ActionForward, without Rule.
func ReplaceBody(m Match, contentType string, body []byte) Rule {
	return Rule{match: m, action: ActionReplaceReply, raw: bytes.Clone(body), contentType: contentType, rawBody: true}
}

// Answer answers selected requests with status and a JSON body
// {"message": message} without forwarding them to the Engine.
func Answer(m Match, status int, message string) Rule {
	return Rule{match: m, action: ActionAnswer, status: status, body: message}
}

// DropRequest closes the client connection on selected requests without
// forwarding them: the Engine never handles the request and the client
// never gets a reply, so it cannot tell this from a lost reply.
func DropRequest(m Match) Rule { return Rule{match: m, action: ActionDropRequest} }

// RewriteRequest forwards selected requests with their body replaced by
// rewrite(body) (Content-Length adjusted): the Engine acts on a request
// the client did not send. A rewrite error fails the exchange and closes
// the connection without forwarding.
func RewriteRequest(m Match, rewrite func(body []byte) ([]byte, error)) Rule {
	return Rule{match: m, action: ActionRewriteRequest, rewrite: rewrite}
}

// RewriteReply forwards selected requests and, when the Engine answered
// 2xx without upgrading, sends the client the Engine's status and headers
// with the body replaced by rewrite(body): the Engine's answer is misreported,
// for example an inspection that reads back a field the Engine did not
// apply. Other replies pass unchanged and are recorded as ActionForward. A
// rewrite error fails the exchange and closes the connection.
func RewriteReply(m Match, rewrite func(body []byte) ([]byte, error)) Rule {
	return Rule{match: m, action: ActionRewriteReply, rewrite: rewrite}
}

// Exchange is the evidence of one request the proxy saw.
type Exchange struct {
	// Seq numbers requests from 1 in arrival order.
	Seq    int
	Method string
	// Path is the unversioned path without query; RawURI is the request
	// target as sent.
	Path   string
	RawURI string
	// Action is what the proxy did; Rule describes the rule that applied.
	Action Action
	Rule   string
	// Status is the Engine's reply status, 0 when none was read (not
	// forwarded, or the Engine connection failed).
	Status int
	// ClientStatus is the status the client received: Status when
	// forwarded or for ReplaceBody, the rule's status for ReplaceReply and
	// Answer, 0 when the reply was dropped or refused.
	ClientStatus int
	// Upgraded reports a 101 reply piped as a stream; StreamBytes counts
	// Engine-to-client stream bytes passed after the head.
	Upgraded    bool
	StreamBytes int64
	// Err is the first proxy-side error of the exchange, if any.
	Err string
}

// Proxy is a running fault proxy. Close it when done: it stops accepting,
// closes every connection and removes its socket.
type Proxy struct {
	socket   string
	upstream string
	ln       net.Listener

	mu       sync.Mutex
	rules    []Rule
	counts   []int
	seen     []Exchange
	conns    map[net.Conn]struct{}
	closed   bool
	closing  chan struct{}
	wg       sync.WaitGroup
	closeErr error
	once     sync.Once
	// severAfter severs the proxy once a rule fired; severed refuses every
	// later request.
	severAfter bool
	severed    bool
}

// New listens on dir/name ("engine.sock" if name is empty) and forwards to
// the Engine socket upstream (an absolute path, optionally "unix://"
// prefixed). dir must exist; the socket path must fit a Unix socket address.
func New(dir, upstream string, rules ...Rule) (*Proxy, error) {
	upstream = strings.TrimPrefix(upstream, "unix://")
	if !filepath.IsAbs(upstream) {
		return nil, fmt.Errorf("faultproxy: upstream %q is not an absolute socket path", upstream)
	}
	socket := filepath.Join(dir, "engine.sock")
	if !filepath.IsAbs(socket) {
		return nil, fmt.Errorf("faultproxy: dir %q is not absolute", dir)
	}
	if len(socket) > maxSocketPath {
		return nil, fmt.Errorf("faultproxy: socket path %s is %d bytes, Unix sockets allow %d; use a shorter dir", socket, len(socket), maxSocketPath)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{socket: socket, upstream: upstream, ln: ln, conns: map[net.Conn]struct{}{}, closing: make(chan struct{})}
	p.SetRules(rules...)
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Socket returns the proxy's socket path.
func (p *Proxy) Socket() string { return p.socket }

// Endpoint returns "unix://" + Socket().
func (p *Proxy) Endpoint() string { return "unix://" + p.socket }

// SetRules replaces the rules, restarts their occurrence counts and lifts
// SeverAfterFault. Rules
// are tried in order; the first one that selects a request applies.
func (p *Proxy) SetRules(rules ...Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.severAfter, p.severed = false, false
	p.rules = append([]Rule(nil), rules...)
	p.counts = make([]int, len(rules))
}

// SeverAfterFault makes the proxy refuse every request after the first one
// a rule applied to: the controller loses the Engine right after the
// fault, as if it died there, and cannot clean up through this proxy.
func (p *Proxy) SeverAfterFault() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.severAfter = true
}

// Seen returns a copy of every exchange so far, in arrival order.
func (p *Proxy) Seen() []Exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Exchange(nil), p.seen...)
}

// Fired returns the exchanges a rule applied to (Action other than forward
// and refused).
func (p *Proxy) Fired() []Exchange {
	var out []Exchange
	for _, e := range p.Seen() {
		if e.Action != ActionForward && e.Action != ActionRefused {
			out = append(out, e)
		}
	}
	return out
}

// Close stops the proxy, closes every open connection, waits for its
// goroutines and removes the socket file. It is idempotent.
func (p *Proxy) Close() error {
	p.once.Do(func() {
		p.mu.Lock()
		p.closed = true
		close(p.closing)
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		err := p.ln.Close()
		p.wg.Wait()
		if rerr := os.Remove(p.socket); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
		p.closeErr = err
	})
	return p.closeErr
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.handle(c)
		}()
	}
}

// begin records a request and picks the rule that applies to it.
func (p *Proxy) begin(req *http.Request) (int, Rule) {
	apiPath := APIPath(req.URL.Path)
	p.mu.Lock()
	defer p.mu.Unlock()
	rule := Rule{action: ActionForward}
	picked := false
	if p.severed {
		rule, picked = Rule{action: ActionRefused}, true
	}
	for i, r := range p.rules {
		if !r.match.matches(req.Method, apiPath) {
			continue
		}
		p.counts[i]++
		if !picked && (r.match.nth == 0 || r.match.nth == p.counts[i]) {
			rule, picked = r, true
		}
	}
	e := Exchange{Seq: len(p.seen) + 1, Method: req.Method, Path: apiPath, RawURI: req.RequestURI, Action: rule.action}
	if picked && rule.action != ActionRefused {
		e.Rule = rule.String()
		if p.severAfter {
			p.severed = true
		}
	}
	p.seen = append(p.seen, e)
	return len(p.seen) - 1, rule
}

func (p *Proxy) update(i int, f func(*Exchange)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.seen[i])
}

func (p *Proxy) fail(i int, err error) {
	p.update(i, func(e *Exchange) {
		if e.Err == "" {
			e.Err = err.Error()
		}
	})
}

// handle serves one client connection. Each client connection gets its own
// Engine connection, so keep-alive and upgrades map one to one; each
// request on it is one exchange (session.serve).
func (p *Proxy) handle(client net.Conn) {
	s := &session{p: p, client: client, cr: bufio.NewReader(client)}
	defer s.closeUpstream()
	for s.serve() == nextRequest {
	}
}

// outcome is what a step of an exchange leaves its connection to do.
type outcome int

const (
	// proceed: on to the exchange's next step.
	proceed outcome = iota
	// nextRequest: the exchange is done; read the connection's next request.
	nextRequest
	// hangUp: close the connection and its Engine connection.
	hangUp
)

// session is one client connection and the Engine connection it gets on
// its first forwarded request.
type session struct {
	p      *Proxy
	client net.Conn
	cr     *bufio.Reader
	up     net.Conn
	ur     *bufio.Reader
}

// closeUpstream closes the session's Engine connection, if it has one.
func (s *session) closeUpstream() {
	if s.up != nil {
		s.p.untrack(s.up)
	}
}

// exchange is one request of a session as serve's steps fill it.
type exchange struct {
	*session
	// i indexes the exchange's evidence in p.seen.
	i    int
	rule Rule
	req  *http.Request
	// resp is the Engine's reply, once forward read it.
	resp *http.Response
}

// serve serves the session's next request, in steps:
//
//  1. read: read the request, record it and pick its rule (begin);
//  2. intercept: what a rule does before the Engine sees the request
//     (refuse, drop, rewrite, answer, delay);
//  3. dial: the session's Engine connection, on its first use;
//  4. forward: send the request and read the Engine's reply;
//  5. reply: what the client gets of it (nothing, a rewritten or replaced
//     reply, the Engine's own reply, or its upgraded stream).
func (s *session) serve() outcome {
	req, err := http.ReadRequest(s.cr)
	if err != nil {
		return hangUp
	}
	i, rule := s.p.begin(req)
	x := &exchange{session: s, i: i, rule: rule, req: req}
	for _, step := range []func() outcome{x.intercept, x.dial, x.forward} {
		if o := step(); o != proceed {
			return o
		}
	}
	return x.reply()
}

// intercept applies the rules that act before the Engine sees the request.
func (x *exchange) intercept() outcome {
	switch x.rule.action {
	case ActionRefused:
		return hangUp
	case ActionDropRequest:
		_, _ = io.Copy(io.Discard, x.req.Body)
		return hangUp
	case ActionRewriteRequest:
		return x.rewriteRequest()
	case ActionAnswer:
		x.p.update(x.i, func(e *Exchange) { e.ClientStatus = x.rule.status })
		_, _ = io.Copy(io.Discard, x.req.Body)
		return x.answered(writeJSON(x.client, x.req, x.rule.status, x.rule.body))
	case ActionDelay:
		select {
		case <-time.After(x.rule.delay):
		case <-x.p.closing:
			return hangUp
		}
	}
	return proceed
}

// rewriteRequest replaces the request's body with rule.rewrite's result.
func (x *exchange) rewriteRequest() outcome {
	body, err := io.ReadAll(x.req.Body)
	if err == nil {
		body, err = x.rule.rewrite(body)
	}
	if err != nil {
		x.p.fail(x.i, fmt.Errorf("rewrite request: %w", err))
		return hangUp
	}
	x.req.Body, x.req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	x.req.TransferEncoding = nil
	x.req.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return proceed
}

// dial opens the session's Engine connection unless it has one.
func (x *exchange) dial() outcome {
	if x.up != nil {
		return proceed
	}
	up, err := net.Dial("unix", x.p.upstream)
	if err != nil {
		x.p.fail(x.i, err)
		return hangUp
	}
	if !x.p.track(up) {
		return hangUp
	}
	x.up, x.ur = up, bufio.NewReader(up)
	return proceed
}

// forward sends the request to the Engine and reads its reply's head.
func (x *exchange) forward() outcome {
	if err := x.req.Write(x.up); err != nil {
		x.p.fail(x.i, fmt.Errorf("forward request: %w", err))
		return hangUp
	}
	resp, err := http.ReadResponse(x.ur, x.req)
	if err != nil {
		x.p.fail(x.i, fmt.Errorf("read Engine reply: %w", err))
		return hangUp
	}
	x.resp = resp
	x.p.update(x.i, func(e *Exchange) { e.Status = resp.StatusCode })
	return proceed
}

// reply gives the client what the rule leaves of the Engine's reply. A
// reply rule that does not apply to this status (RewriteReply on other
// than a plain 2xx, ReplaceBody on a non-2xx) passes the reply unchanged
// and is recorded as a forward.
func (x *exchange) reply() outcome {
	switch x.rule.action {
	case ActionDropReply:
		_, _ = io.Copy(io.Discard, x.resp.Body)
		x.resp.Body.Close()
		return hangUp
	case ActionRewriteReply:
		if x.engine2xx() && x.resp.StatusCode != http.StatusSwitchingProtocols {
			return x.rewriteReply()
		}
		x.unfired()
	case ActionReplaceReply:
		if !x.rule.rawBody || x.engine2xx() {
			return x.replaceReply()
		}
		x.unfired()
	}
	return x.pass()
}

// engine2xx reports a 2xx Engine reply.
func (x *exchange) engine2xx() bool {
	return x.resp.StatusCode >= 200 && x.resp.StatusCode <= 299
}

// unfired records the exchange as a plain forward: its rule did not apply.
func (x *exchange) unfired() {
	x.p.update(x.i, func(e *Exchange) { e.Action, e.Rule = ActionForward, "" })
}

// rewriteReply sends the client the Engine's status and headers with the
// body replaced by rule.rewrite's result.
func (x *exchange) rewriteReply() outcome {
	resp := x.resp
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		body, err = x.rule.rewrite(body)
	}
	if err != nil {
		x.p.fail(x.i, fmt.Errorf("rewrite reply: %w", err))
		return hangUp
	}
	x.p.update(x.i, func(e *Exchange) { e.ClientStatus = resp.StatusCode })
	return x.answered(writeBody(x.client, x.req, resp, resp.Header.Get("Content-Type"), body))
}

// replaceReply discards the Engine's reply body and sends the client
// ReplaceBody's body under the Engine's status, or ReplaceReply's status
// and message.
func (x *exchange) replaceReply() outcome {
	resp := x.resp
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if x.rule.rawBody {
		x.p.update(x.i, func(e *Exchange) { e.ClientStatus = resp.StatusCode })
		return x.answered(writeBody(x.client, x.req, resp, x.rule.contentType, x.rule.raw))
	}
	x.p.update(x.i, func(e *Exchange) { e.ClientStatus = x.rule.status })
	return x.answered(writeJSON(x.client, x.req, x.rule.status, x.rule.body))
}

// pass gives the client the Engine's own reply: when upgraded, its stream
// (cut after rule.after bytes for CutStream) until either side ends it.
func (x *exchange) pass() outcome {
	resp := x.resp
	x.p.update(x.i, func(e *Exchange) { e.ClientStatus = resp.StatusCode })
	if resp.StatusCode == http.StatusSwitchingProtocols {
		x.p.update(x.i, func(e *Exchange) { e.Upgraded = true })
		limit := int64(-1)
		if x.rule.action == ActionCutStream {
			limit = x.rule.after
		}
		x.p.tunnel(x.i, x.client, x.cr, x.up, x.ur, resp, limit)
		return hangUp
	}
	if err := resp.Write(x.client); err != nil {
		x.p.fail(x.i, fmt.Errorf("write reply: %w", err))
		return hangUp
	}
	resp.Body.Close()
	if x.req.Close || resp.Close {
		return hangUp
	}
	return nextRequest
}

// answered ends an exchange whose own reply was written with err: the
// session goes on unless the write failed or either side asked to close.
func (x *exchange) answered(err error) outcome {
	if err != nil || x.req.Close || (x.resp != nil && x.resp.Close) {
		return hangUp
	}
	return nextRequest
}

// tunnel writes the 101 head to the client and pipes both ways. limit >= 0
// cuts both connections after that many Engine-to-client bytes.
func (p *Proxy) tunnel(i int, client net.Conn, cr *bufio.Reader, up net.Conn, ur *bufio.Reader, resp *http.Response, limit int64) {
	var head strings.Builder
	fmt.Fprintf(&head, "HTTP/%d.%d %s\r\n", resp.ProtoMajor, resp.ProtoMinor, resp.Status)
	_ = resp.Header.Write(&head)
	head.WriteString("\r\n")
	if _, err := io.WriteString(client, head.String()); err != nil {
		p.fail(i, err)
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		// Client to Engine: stdin, with half-close passed on.
		_, _ = io.Copy(up, cr)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		var src io.Reader = ur
		if limit >= 0 {
			src = io.LimitReader(ur, limit)
		}
		n, _ := io.Copy(client, src)
		p.update(i, func(e *Exchange) { e.StreamBytes = n })
		if limit >= 0 {
			// Cut: the stream dies mid-flight for both sides.
			client.Close()
			up.Close()
		} else if cw, ok := client.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

// writeBody answers req with the Engine reply resp's status and headers
// but body, of type contentType, as its content.
func writeBody(w io.Writer, req *http.Request, resp *http.Response, contentType string, body []byte) error {
	h := resp.Header.Clone()
	h.Set("Content-Type", contentType)
	out := &http.Response{
		StatusCode:    resp.StatusCode,
		ProtoMajor:    1,
		ProtoMinor:    1,
		Request:       req,
		Header:        h,
		ContentLength: int64(len(body)),
		Body:          io.NopCloser(bytes.NewReader(body)),
		Close:         req.Close || resp.Close,
	}
	return out.Write(w)
}

// writeJSON answers req with status and an Engine-style error body.
func writeJSON(w io.Writer, req *http.Request, status int, message string) error {
	msg, err := json.Marshal(message)
	if err != nil {
		return err
	}
	body := "{\"message\":" + string(msg) + "}\n"
	resp := &http.Response{
		StatusCode:    status,
		ProtoMajor:    1,
		ProtoMinor:    1,
		Request:       req,
		Header:        http.Header{"Content-Type": {"application/json"}},
		ContentLength: int64(len(body)),
		Body:          io.NopCloser(strings.NewReader(body)),
		Close:         req.Close,
	}
	return resp.Write(w)
}
