package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/qualify/guest/facts"
	"github.com/qualbox/qualbox/sandboxapi"
)

// noParams is the Validate of scenarios without params.
func noParams(params map[string]any) error { return DecodeParams(params, &struct{}{}) }

// DescendantContainment starts descendants in their own sessions that
// outlive the process leader (docs/contract.md#processes-and-streams). After the
// leader exits they must still run inside the scope; after stop they must
// be gone from the host with the scope.
type DescendantContainment struct{}

// Name returns "descendant-containment".
func (DescendantContainment) Name() string { return "descendant-containment" }

// Validate accepts no params.
func (DescendantContainment) Validate(params map[string]any) error { return noParams(params) }

// Run spawns, observes and stops.
func (s DescendantContainment) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	const n = 3
	o, err := startObserved(ctx, env, rec, "tree", env.Policy)
	defer o.cleanup(ctx)
	if err != nil {
		return err
	}
	series := o.series(ctx)
	defer series()
	exit, stdout, _, err := o.run(ctx, probeSpec("spawn", fmt.Sprint(n), "60"))
	if err != nil {
		return err
	}
	rs, err := results(stdout)
	if err != nil || len(rs) != 1 {
		return fmt.Errorf("probe spawn result: %v (%d results)", err, len(rs))
	}
	checkSeriesRise(rec, "tree", "pids.current (the descendants)", series(), pidsCurrent, n)
	rec.Equal("leader exit receipt", sandboxapi.Exited(0).String(), exit.String())
	rec.Equal("descendants started", int64(n), rs[0].Done)
	during := o.snap("during")
	// The descendants are the scope's processes running the probe's
	// `sleep 60` (the keeper's own `sleep 3600` may start at any time).
	var added []int
	for _, p := range during.Procs {
		cmd, err := fs.ReadFile(env.HostFS(), fmt.Sprintf("proc/%d/cmdline", p))
		if err == nil && string(cmd) == "sleep\x0060\x00" && !containsInt(o.snaps[0].Procs, p) {
			added = append(added, p)
		}
	}
	rec.Observe("descendant host PIDs", added)
	rec.Equal("observer: descendants in the scope after the leader exited", n, len(added))
	host := env.HostFS()

	stopErr := o.stop(ctx)
	rec.Check("stop compute", "nil", errText(stopErr), stopErr == nil)
	deadline := time.Now().Add(10 * time.Second)
	var left []int
	for {
		left = left[:0]
		for _, p := range added {
			if _, err := fs.Stat(host, fmt.Sprintf("proc/%d", p)); err == nil {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	rec.Check("descendants gone from the host after stop", "none", left, len(left) == 0)
	a := o.scope.Absence(host)
	rec.Check("observer: scope gone or empty after stop (before destroy)", "gone|empty", a.String(), a.OK())
	return nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// NetworkIsolation checks both network modes: isolated sees only lo and
// cannot reach a TCP listener on the host's address; outbound is attached
// to the sandbox's own private bridge network (lo plus one interface, the
// network is a bridge created for this sandbox, not the default one).
//
// From the outbound sandbox it also looks for an Engine API, which would
// let the workload start a privileged container of its own: an HTTP GET
// of /_ping at each EngineAPIPorts port of the network's gateway and of
// the host's address, and at DesktopEngineAddress (CVE-2025-9074: Docker
// Desktop answered containers there, unauthenticated). Any reply that is
// an Engine API's fails the scenario. Whether the cloud metadata service
// at MetadataURL answers is recorded as a fact of the run, not judged.
type NetworkIsolation struct {
	// Listen opens the host listener the sandboxes try to reach; nil is
	// net.Listen. Negative tests give one that is not running, which the
	// outbound case must catch.
	Listen func(network, address string) (net.Listener, error)
	// EngineAPIPorts are the TCP ports probed for an Engine API on the
	// gateway and the host address; nil is DefaultEngineAPIPorts.
	EngineAPIPorts []int
	// EditNetwork rewrites the Engine's inspect of the outbound network
	// before it is read; nil keeps it. Negative tests drop its gateway,
	// which the outbound case must catch.
	EditNetwork func(*network.Inspect)
}

// DefaultEngineAPIPorts are the Engine API's registered TCP ports: 2375
// (plain HTTP) and 2376 (TLS; a plain request there is answered by the TLS
// server's refusal, which is not an Engine API reply, so only a daemon
// listening without TLS on it fails the check).
var DefaultEngineAPIPorts = []int{2375, 2376}

// DesktopEngineAddress is where Docker Desktop's Linux VM answered the
// Engine API to containers before 4.44.3 (CVE-2025-9074).
const DesktopEngineAddress = "192.168.65.7:2375"

// MetadataURL is the link-local cloud instance metadata service (AWS,
// OpenStack; GCP and Azure answer there too, refusing requests without
// their header).
const MetadataURL = "http://169.254.169.254/latest/meta-data/"

// Probe timeouts, in seconds. The Desktop and metadata addresses are
// routed off the host and, where nothing answers, time out, so they are
// probed in the background while the local addresses are probed one after
// another: those answer or refuse at once, and a sandbox held to a
// fraction of a CPU must not let a slow reply pass for no Engine.
const (
	remoteProbeSeconds = 2
	localProbeSeconds  = 5
)

// engineTarget is one place an Engine API is looked for; local ones are
// on the Engine's host or the harness's.
type engineTarget struct {
	where, url string
	local      bool
}

// engineHost is an address probed on each Engine API port, where names
// it for check names.
type engineHost struct{ where, ip string }

// engineTargets lists where the outbound sandbox looks for an Engine API:
// each port (duplicates dropped) of each host address (an address met
// twice keeps its first name), over plain HTTP and over TLS without a
// client certificate (a daemon started with --tls but not --tlsverify
// serves anyone who connects), then the Desktop VM's address.
func (s NetworkIsolation) engineTargets(hosts []engineHost) []engineTarget {
	ports := s.EngineAPIPorts
	if ports == nil {
		ports = DefaultEngineAPIPorts
	}
	var ts []engineTarget
	seenPort := map[int]bool{}
	for _, port := range ports {
		if seenPort[port] {
			continue
		}
		seenPort[port] = true
		seenIP := map[string]bool{}
		for _, h := range hosts {
			if seenIP[h.ip] {
				continue
			}
			seenIP[h.ip] = true
			addr := net.JoinHostPort(h.ip, strconv.Itoa(port))
			ts = append(ts,
				engineTarget{fmt.Sprintf("%s %s port %d (HTTP)", h.where, h.ip, port), "http://" + addr + "/_ping", true},
				engineTarget{fmt.Sprintf("%s %s port %d (TLS, no client certificate)", h.where, h.ip, port), "https://" + addr + "/_ping", true})
		}
	}
	return append(ts, engineTarget{"the Docker Desktop VM address", "http://" + DesktopEngineAddress + "/_ping", false})
}

// shellQuote returns s as one single-quoted POSIX shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// serviceProbes is the shell that looks for an Engine API at targets and
// for the metadata service: the remote ones in the background, the local
// ones one at a time meanwhile (each probe prints its result as one line,
// written whole).
func serviceProbes(targets []engineTarget) string {
	var bg, fg []string
	for _, t := range append(targets, engineTarget{"metadata", MetadataURL, false}) {
		if t.local {
			fg = append(fg, fmt.Sprintf("%s http %s %d", ProbePath, shellQuote(t.url), localProbeSeconds))
		} else {
			bg = append(bg, fmt.Sprintf("%s http %s %d &", ProbePath, shellQuote(t.url), remoteProbeSeconds))
		}
	}
	script := strings.Join(bg, " ")
	for _, c := range fg {
		script += " " + c + ";"
	}
	return script + " wait"
}

// checkServices records the service probes' results rs: a check that no
// target answered as an Engine API, and the metadata service's state.
func checkServices(rec *Record, targets []engineTarget, rs []facts.Result) error {
	byURL := map[string]facts.Result{}
	for _, r := range rs {
		byURL[r.Address] = r
	}
	rec.Observe("outbound: Engine API and metadata probes", rs)
	for _, t := range targets {
		r, ok := byURL[t.url]
		if !ok {
			return fmt.Errorf("outbound: no probe result for %s", t.url)
		}
		rec.Check("outbound: no Engine API at "+t.where, "no Engine API reply from "+t.url, describeHTTP(r), !r.HTTP.EngineAPI())
	}
	md, ok := byURL[MetadataURL]
	if !ok {
		return fmt.Errorf("outbound: no probe result for %s", MetadataURL)
	}
	rec.Observe("outbound: cloud metadata service", map[string]any{"url": MetadataURL, "answers": md.HTTP != nil, "result": describeHTTP(md)})
	return nil
}

// describeHTTP renders an http probe result for a check's got.
func describeHTTP(r facts.Result) string {
	if r.HTTP == nil {
		return "no reply: " + Render(r.Outcome)
	}
	d := fmt.Sprintf("HTTP %d", r.HTTP.Status)
	if r.HTTP.APIVersion != "" {
		d += ", Api-Version " + r.HTTP.APIVersion
	}
	if r.HTTP.Server != "" {
		d += ", Server " + strconv.Quote(r.HTTP.Server)
	}
	return d
}

// Name returns "network-isolation".
func (NetworkIsolation) Name() string { return "network-isolation" }

// Validate accepts no params.
func (NetworkIsolation) Validate(params map[string]any) error { return noParams(params) }

// hostAddresses returns the host's non-loopback IPv4 addresses, in the
// order of its interfaces; the first is where the host listener opens.
func hostAddresses() ([]string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			ips = append(ips, ipn.IP.String())
		}
	}
	if len(ips) == 0 {
		return nil, errors.New("no non-loopback IPv4 address on the host")
	}
	return ips, nil
}

// gatewayHosts returns nw's valid IPAM gateways, named where.
func gatewayHosts(nw network.Inspect, where string) []engineHost {
	var hs []engineHost
	for _, c := range nw.IPAM.Config {
		if c.Gateway.IsValid() {
			hs = append(hs, engineHost{where, c.Gateway.String()})
		}
	}
	return hs
}

// Run runs facts and a connect in each mode, in steps:
//
//  1. listen: a host listener on the host's first non-loopback IPv4
//     address, counting the connections it accepts;
//  2. runCase for the isolated, then the outbound mode.
func (s NetworkIsolation) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	n := &netIsolation{s: s, env: env, rec: rec}
	ln, err := n.listen()
	if err != nil {
		return err
	}
	defer ln.Close()
	for _, kind := range []sandboxapi.NetworkKind{sandboxapi.NetworkIsolated, sandboxapi.NetworkOutbound} {
		if err := n.runCase(ctx, kind); err != nil {
			return err
		}
	}
	return nil
}

// netIsolation is the state of one NetworkIsolation run.
type netIsolation struct {
	s   NetworkIsolation
	env *Env
	rec *Record
	// hostIPs are the host's non-loopback IPv4 addresses; addr is the
	// host listener's address and accepted counts its connections.
	hostIPs  []string
	addr     string
	accepted atomic.Int64
}

// listen opens the host listener and counts what it accepts until it is
// closed.
func (n *netIsolation) listen() (net.Listener, error) {
	hostIPs, err := hostAddresses()
	if err != nil {
		return nil, err
	}
	n.hostIPs = hostIPs
	listen := n.s.Listen
	if listen == nil {
		listen = net.Listen
	}
	ln, err := listen("tcp", net.JoinHostPort(hostIPs[0], "0"))
	if err != nil {
		return nil, fmt.Errorf("host listener: %w", err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.accepted.Add(1)
			c.Close()
		}
	}()
	n.addr = ln.Addr().String()
	n.rec.Request("host listener", n.addr)
	return ln, nil
}

// netCase is one mode's sandbox as runCase's steps fill it.
type netCase struct {
	*netIsolation
	kind sandboxapi.NetworkKind
	name string
	pol  sandboxapi.Policy
	o    *observed
	// script is the sandbox's one process: facts, a connect to the host
	// listener and, outbound, the service probes at targets.
	script  string
	nw      network.Inspect
	targets []engineTarget
	// before is the listener's accepted count before the probe ran.
	before int64
	// names are the sandbox's interfaces, connect the connect's result
	// and served the service probes' results.
	names   []string
	connect facts.Result
	served  []facts.Result
}

// runCase runs one mode, in steps:
//
//  1. start an observed sandbox with the mode's network and check the
//     Engine's readback of it;
//  2. outbound only: read the sandbox's network and look for services at
//     its gateways and the host's addresses (outboundTargets);
//  3. probe: run the script and read its results;
//  4. check what the mode must show (checkIsolated, checkOutbound).
func (n *netIsolation) runCase(ctx context.Context, kind sandboxapi.NetworkKind) error {
	c := &netCase{netIsolation: n, kind: kind, name: string(kind), pol: n.env.Policy}
	c.pol.Network = sandboxapi.Network{Kind: kind}
	o, err := startObserved(ctx, n.env, n.rec, c.name, c.pol)
	defer o.cleanup(ctx)
	if err != nil {
		return err
	}
	c.o = o
	n.rec.Equal(c.name+": effective network (Engine readback)", c.pol.Network, o.sb.Effective().Network)
	// The sandbox runs one process: the outbound one also looks for
	// services it must not reach, at its network's gateway among others,
	// so the network is read first.
	c.script = fmt.Sprintf("%[1]s facts; %[1]s connect %[2]s 2", ProbePath, n.addr)
	if kind == sandboxapi.NetworkOutbound {
		if err := c.outboundTargets(ctx); err != nil {
			return err
		}
	}
	if err := c.probe(ctx); err != nil {
		return err
	}
	if kind == sandboxapi.NetworkIsolated {
		c.checkIsolated()
		return nil
	}
	return c.checkOutbound()
}

// outboundTargets reads the sandbox's network, checks it has a gateway,
// and adds to the script the service probes at its gateways, the default
// bridge's and the host's addresses.
func (c *netCase) outboundTargets(ctx context.Context) error {
	netID := resourceID(c.o.res, sandboxapi.RoleNetwork)
	r, err := c.env.Engine.NetworkInspect(ctx, netID, client.NetworkInspectOptions{})
	if err != nil {
		return fmt.Errorf("outbound: inspect network %s: %w", netID, err)
	}
	c.nw = r.Network
	if c.s.EditNetwork != nil {
		c.s.EditNetwork(&c.nw)
	}
	hosts := gatewayHosts(c.nw, "the network's gateway")
	var gws []string
	for _, h := range hosts {
		gws = append(gws, h.ip)
	}
	c.rec.Check("outbound: the network's gateway (Engine IPAM)", ">= 1 address", gws, len(gws) >= 1)
	// The default bridge's gateway is an address of the Engine's own
	// host, which the harness's need not be; an Engine run without it
	// (--bridge=none) has none.
	def, err := c.env.Engine.NetworkInspect(ctx, "bridge", client.NetworkInspectOptions{})
	switch {
	case err == nil:
		hosts = append(hosts, gatewayHosts(def.Network, "the default bridge's gateway")...)
	case cerrdefs.IsNotFound(err):
		c.rec.Observe("outbound: default bridge network", "absent")
	default:
		return fmt.Errorf("outbound: inspect the default bridge network: %w", err)
	}
	for _, h := range c.hostIPs {
		hosts = append(hosts, engineHost{"the host address", h})
	}
	c.targets = c.s.engineTargets(hosts)
	c.script += "; " + serviceProbes(c.targets)
	return nil
}

// probe runs the script as the sandbox's one process and reads its facts
// (the interfaces), its one connect result and the service probes'.
func (c *netCase) probe(ctx context.Context) error {
	c.before = c.accepted.Load()
	exit, stdout, _, err := c.o.run(ctx, shellSpec(c.script))
	if err != nil {
		return err
	}
	c.rec.Equal(c.name+": exit receipt", sandboxapi.Exited(0).String(), exit.String())
	first, rest, _ := bytes.Cut(stdout, []byte("\n"))
	f, err := facts.Decode(first)
	if err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	for _, i := range f.Interfaces {
		c.names = append(c.names, i.Name)
	}
	c.rec.Observe(c.name+": interfaces", f.Interfaces)
	all, err := results(rest)
	var rs []facts.Result
	for _, r := range all {
		if r.Action == "http" {
			c.served = append(c.served, r)
		} else {
			rs = append(rs, r)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: probe results: %w", c.name, err)
	}
	if len(rs) != 1 {
		return fmt.Errorf("%s: want 1 probe connect result, got %d", c.name, len(rs))
	}
	c.connect = rs[0]
	c.rec.Observe(c.name+": connect", rs[0])
	return nil
}

// checkIsolated checks the isolated sandbox has loopback only, reached
// nothing and has no network resource.
func (c *netCase) checkIsolated() {
	rec := c.rec
	rec.Equal("isolated: interfaces", []string{"lo"}, c.names)
	rec.Check("isolated: host listener unreachable", "connect fails", c.connect.Outcome, !c.connect.OK)
	rec.Equal("isolated: connections the host listener accepted", int64(0), c.accepted.Load()-c.before)
	rec.Equal("isolated: no network resource", "", resourceID(c.o.res, sandboxapi.RoleNetwork))
}

// checkOutbound checks the outbound sandbox reached the host listener
// through its own private bridge network and found no Engine API.
func (c *netCase) checkOutbound() error {
	rec, nw := c.rec, c.nw
	rec.Check("outbound: interfaces", "lo and one more", c.names, len(c.names) == 2 && c.names[0] == "lo")
	// The accept loop counts after Accept returns: give it a moment.
	rose := waitRise(&c.accepted, c.before, 2*time.Second)
	rec.Check("outbound: host listener reachable", "connect ok; accepted count rose",
		fmt.Sprintf("connect %s; accepted %+d", Render(c.connect.Outcome), rose), c.connect.OK && rose >= 1)
	rec.Observe("outbound: network", map[string]any{"id": nw.ID, "name": nw.Name, "driver": nw.Driver, "internal": nw.Internal})
	rec.Equal("outbound: network driver", "bridge", nw.Driver)
	rec.Equal("outbound: network internal", false, nw.Internal)
	var planned string
	for _, r := range c.o.res.RecoveryRecord().Resources {
		if r.Role == sandboxapi.RoleNetwork {
			planned = r.Name
		}
	}
	rec.Check("outbound: private network (the sandbox's own, not the default bridge)", planned, nw.Name,
		nw.Name != "bridge" && nw.Name == planned && strings.HasPrefix(planned, "qualbox-"))
	return checkServices(rec, c.targets, c.served)
}

// waitRise returns how much n rose above before, waiting up to limit for
// it to rise at all.
func waitRise(n *atomic.Int64, before int64, limit time.Duration) int64 {
	deadline := time.Now().Add(limit)
	for n.Load() == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return n.Load() - before
}

// StreamLimits exceeds the policy's output limit (maxOutputBytes) and a
// stdin lifetime limit: each must fail with output_limit / input_limit and
// stop the whole sandbox (the observer sees the scope gone before the
// scenario stops anything).
type StreamLimits struct{}

// Name returns "stream-limits".
func (StreamLimits) Name() string { return "stream-limits" }

// Validate accepts no params.
func (StreamLimits) Validate(params map[string]any) error { return noParams(params) }

// Run runs the output and the input case.
func (s StreamLimits) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	outLimit := int64(64 << 10)
	pol := env.Policy
	pol.Streams.MaxOutputBytes = &outLimit
	if err := func() error {
		o, err := startObserved(ctx, env, rec, "output", pol)
		defer o.cleanup(ctx)
		if err != nil {
			return err
		}
		p, err := o.start(ctx, probeSpec("write", "stdout", fmt.Sprint(16*outLimit)), false)
		if err != nil {
			return err
		}
		exit, err := p.wait(ctx)
		rec.Observe("output: exit", exit)
		rec.Observe("output: error", errText(err))
		rec.Check("output: fails with output_limit", "output_limit", errText(err), errors.Is(err, sandboxapi.ErrOutputLimit))
		rec.Check("output: bytes delivered within the limit", fmt.Sprintf("<= %d", outLimit), p.stdout.Len(), int64(p.stdout.Len()) <= outLimit)
		waitGone(ctx, o, rec, "output")
		return nil
	}(); err != nil {
		return err
	}

	inLimit := int64(64 << 10)
	pol = env.Policy
	pol.Streams.MaxStdinBytes = &inLimit
	o, err := startObserved(ctx, env, rec, "input", pol)
	defer o.cleanup(ctx)
	if err != nil {
		return err
	}
	p, err := o.start(ctx, probeSpec("echo"), true)
	if err != nil {
		return err
	}
	chunk := bytes.Repeat([]byte("i"), 16<<10)
	var sent int64
	var werr error
	for sent <= 4*inLimit && werr == nil {
		var k int
		k, werr = p.p.Stdin().Write(chunk)
		sent += int64(k)
	}
	rec.Observe("input: bytes accepted", sent)
	rec.Check("input: write fails with input_limit", "input_limit", errText(werr), errors.Is(werr, sandboxapi.ErrInputLimit))
	rec.Check("input: bytes accepted within the limit", fmt.Sprintf("<= %d", inLimit), sent, sent <= inLimit)
	_ = p.p.Stdin().Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, _ = p.wait(wctx)
	cancel()
	waitGone(ctx, o, rec, "input")
	return nil
}

// waitGone checks that the sandbox's scope disappears without the scenario
// stopping it (the driver stops the whole sandbox on a stream failure).
func waitGone(ctx context.Context, o *observed, rec *Record, name string) {
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	a := o.scope.WaitAbsent(wctx, o.env.HostFS(), 50*time.Millisecond)
	cancel()
	rec.Check(name+": observer: whole sandbox stopped by the driver", "gone|empty", a.String(), a.OK())
}

// Cancellation cancels a running wait and a startup: the wait returns
// cancelled and abandoning the streams stops the whole sandbox; a start
// whose context is already cancelled returns cancelled without creating
// anything, and its reservation still cleans up.
type Cancellation struct{}

// Name returns "cancellation".
func (Cancellation) Name() string { return "cancellation" }

// Validate accepts no params.
func (Cancellation) Validate(params map[string]any) error { return noParams(params) }

// Exclusive says why cancellation runs alone under --parallel.
func (Cancellation) Exclusive() string {
	return "it bounds how promptly a cancelled wait returns (2 s); concurrent scenarios' load would decide that bound"
}

// Run cancels a wait, then a start.
func (s Cancellation) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	if err := func() error {
		o, err := startObserved(ctx, env, rec, "wait", env.Policy)
		defer o.cleanup(ctx)
		if err != nil {
			return err
		}
		p, err := o.start(ctx, probeSpec("sleep", "30"), false)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		start := time.Now()
		_, werr := p.p.Wait(wctx)
		cancel()
		rec.Check("wait: returns cancelled or deadline_exceeded", "cancelled|deadline_exceeded", errText(werr),
			errors.Is(werr, sandboxapi.ErrCancelled) || errors.Is(werr, sandboxapi.ErrDeadlineExceeded))
		rec.Check("wait: returns promptly", "< 2s", time.Since(start).String(), time.Since(start) < 2*time.Second)
		o.snap("during")
		// Abandon both output streams: the driver stops the sandbox.
		p.p.Stdout().Close()
		p.p.Stderr().Close()
		// Bounded: when the driver's own stop fails, the receipt waits for
		// a retried stop (o.cleanup's), which an unbounded wait here would
		// never reach.
		actx, acancel := cleanupContext(ctx, env.Policy)
		exit, _ := p.wait(actx)
		late := actx.Err() != nil
		acancel()
		rec.Observe("wait: exit after abandonment", exit)
		got := exit.String()
		if late {
			got = fmt.Sprintf("no receipt within the cleanup deadline (%d ms): the driver's stop did not settle it", env.Policy.Deadlines.CleanupMs)
		}
		rec.Check("wait: receipt after abandonment", sandboxapi.Unavailable().String(), got, !late && exit == sandboxapi.Unavailable())
		waitGone(ctx, o, rec, "wait")
		return nil
	}(); err != nil {
		return err
	}

	b, err := env.Backend(env.Profile)
	if err != nil {
		return err
	}
	defer b.Close()
	res, err := b.Reserve(env.Request(), sandboxapi.InProcess())
	if err != nil {
		return err
	}
	rec.Track(res)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, serr := res.Start(cctx)
	rec.Check("start: cancelled start returns cancelled", "cancelled", errText(serr), errors.Is(serr, sandboxapi.ErrCancelled))
	identified := 0
	for _, r := range res.RecoveryRecord().Resources {
		if r.Identity.Kind != sandboxapi.IdentityPlanned {
			identified++
		}
	}
	rec.Equal("start: resources created by the cancelled start", 0, identified)
	stopErr, destroyErr := stopAndDestroy(ctx, env.Policy, res)
	rec.CleanupError("start: stop", stopErr)
	rec.CleanupError("start: destroy", destroyErr)
	return nil
}
