package scenario

import (
	"net/netip"
	"os/exec"
	"testing"

	"github.com/moby/moby/api/types/network"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/guest/facts"
)

// The Engine API targets: every port once, every address once under the
// first name it came with, HTTP and TLS for each, then the Desktop VM's
// address; only that one is not local.
func TestEngineTargets(t *testing.T) {
	s := NetworkIsolation{EngineAPIPorts: []int{2375, 2375, 2376}}
	ts := s.engineTargets([]engineHost{
		{"the network's gateway", "172.18.0.1"},
		{"the default bridge's gateway", "172.17.0.1"},
		{"the host address", "172.17.0.1"},
		{"the host address", "192.0.2.2"},
	})
	var names, urls []string
	for _, tg := range ts {
		names = append(names, tg.where)
		urls = append(urls, tg.url)
		assert.Check(t, tg.local == (tg.url != "http://"+DesktopEngineAddress+"/_ping"), tg.url)
	}
	assert.DeepEqual(t, urls, []string{
		"http://172.18.0.1:2375/_ping", "https://172.18.0.1:2375/_ping",
		"http://172.17.0.1:2375/_ping", "https://172.17.0.1:2375/_ping",
		"http://192.0.2.2:2375/_ping", "https://192.0.2.2:2375/_ping",
		"http://172.18.0.1:2376/_ping", "https://172.18.0.1:2376/_ping",
		"http://172.17.0.1:2376/_ping", "https://172.17.0.1:2376/_ping",
		"http://192.0.2.2:2376/_ping", "https://192.0.2.2:2376/_ping",
		"http://192.168.65.7:2375/_ping",
	})
	assert.Check(t, is.Equal(names[2], "the default bridge's gateway 172.17.0.1 port 2375 (HTTP)"))
	assert.Check(t, is.Equal(names[5], "the host address 192.0.2.2 port 2375 (TLS, no client certificate)"))
	seen := map[string]bool{}
	for _, n := range names {
		assert.Check(t, !seen[n], "duplicate check name %q", n)
		seen[n] = true
	}
	// nil ports are the registered pair.
	assert.Check(t, is.Len(NetworkIsolation{}.engineTargets([]engineHost{{"h", "192.0.2.2"}}), 2*2+1))

	nw := network.Inspect{}
	nw.IPAM.Config = []network.IPAMConfig{{Gateway: netip.MustParseAddr("172.18.0.1")}, {}}
	hs := gatewayHosts(nw, "g")
	assert.Assert(t, is.Len(hs, 1))
	assert.Check(t, hs[0] == engineHost{"g", "172.18.0.1"}, "%+v", hs[0])
}

// The probe shell: the remote addresses in the background, the local ones
// one after another with the longer timeout, each URL one quoted word, and
// a wait for the background ones; sh parses it.
func TestServiceProbes(t *testing.T) {
	ts := NetworkIsolation{EngineAPIPorts: []int{2375}}.engineTargets([]engineHost{{"h", "192.0.2.2"}})
	script := serviceProbes(ts)
	want := ProbePath + " http 'http://192.168.65.7:2375/_ping' 2 & " +
		ProbePath + " http '" + MetadataURL + "' 2 & " +
		ProbePath + " http 'http://192.0.2.2:2375/_ping' 5; " +
		ProbePath + " http 'https://192.0.2.2:2375/_ping' 5; wait"
	assert.Equal(t, script, want)
	assert.Equal(t, shellQuote("a'b"), `'a'\''b'`)
	if sh, err := exec.LookPath("sh"); err == nil {
		out, err := exec.Command(sh, "-n", "-c", script).CombinedOutput()
		assert.NilError(t, err, string(out))
		out, err = exec.Command(sh, "-c", "printf %s "+shellQuote("a'b $x")).CombinedOutput()
		assert.NilError(t, err)
		assert.Equal(t, string(out), "a'b $x")
	}
}

// checkServices fails the check of the target that answered as an Engine
// API and only that one, records the metadata service's state, and
// refuses a run whose results lack a target or the metadata probe.
func TestCheckServices(t *testing.T) {
	ts := NetworkIsolation{EngineAPIPorts: []int{2375}}.engineTargets([]engineHost{{"the host address", "192.0.2.2"}})
	res := func(url string, reply *facts.HTTPReply) facts.Result {
		r := facts.Result{Action: "http", Address: url, HTTP: reply}
		r.OK = reply != nil
		if !r.OK {
			r.Errno, r.Error = "ECONNREFUSED", "connection refused"
		}
		return r
	}
	rs := []facts.Result{
		res(ts[0].url, &facts.HTTPReply{Status: 200, APIVersion: "1.52", Server: "Docker/29.1.0 (linux)", Body: "OK"}),
		res(ts[1].url, nil),
		res(ts[2].url, &facts.HTTPReply{Status: 404, Server: "keryx"}),
		res(MetadataURL, &facts.HTTPReply{Status: 403}),
	}
	rec := NewRecord()
	assert.NilError(t, checkServices(rec, ts, rs))
	snap := rec.Snapshot()
	assert.DeepEqual(t, failed(snap.Checks), []string{"outbound: no Engine API at the host address 192.0.2.2 port 2375 (HTTP)"})
	assert.Check(t, is.Contains(snap.Checks[0].Got, "Api-Version 1.52"))
	md := snap.Observed["outbound: cloud metadata service"].(map[string]any)
	assert.Check(t, is.Equal(md["answers"], true))
	assert.Check(t, is.Equal(md["result"], "HTTP 403"))

	// No Engine anywhere passes every check.
	rs[0] = res(ts[0].url, nil)
	rec = NewRecord()
	assert.NilError(t, checkServices(rec, ts, rs))
	assert.Check(t, is.Len(failed(rec.Snapshot().Checks), 0))

	// A missing result is an error naming the URL, not a pass.
	err := checkServices(NewRecord(), ts, rs[1:])
	assert.ErrorContains(t, err, "no probe result for "+ts[0].url)
	err = checkServices(NewRecord(), ts, rs[:3])
	assert.ErrorContains(t, err, "no probe result for "+MetadataURL)
}
