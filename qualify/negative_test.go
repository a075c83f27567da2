package qualify_test

// Negative tests: for every scenario of the catalogue, the Engine, the
// fault proxy, the probe's host view or a scenario seam is made to lie or
// misbehave, on the real Engine, and the scenario must fail, with the
// check that exists for that reason among its failed checks
// (docs/qualification.md#scenarios).

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/skip"

	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/faultproxy"
	"github.com/qualbox/qualbox/qualify/guest"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
	"github.com/qualbox/qualbox/sandboxapi"
)

// lie is one negative test: how the scenario is lied to, and the check
// that must fail because of it.
type lie struct {
	scenario string
	// manifest is the manifest run (its Engine must answer); default
	// shippedManifest (lane A).
	manifest string
	// params replace the manifest's params of the scenario when set.
	params map[string]any
	// rules go on a fault proxy between every driver of the run and the
	// Engine (the manifest endpoint); the run's read-only Engine client
	// and the runner's absence checks stay direct.
	rules func(t *testing.T, cli *client.Client) []faultproxy.Rule
	// host replaces the observer's view of the host (/proc, /sys/fs/cgroup).
	host fs.FS
	// variant replaces the registered scenario (a seam of the scenario).
	variant scenario.Scenario
	// check matches the name of the check that must fail.
	check *regexp.Regexp
}

// runLie runs l.scenario alone through the runner on the real Engine with
// the lie in place, checks its verdict is failed with a failed check
// matching l.check, removes by exact ID whatever the lie left behind, and
// returns the evidence.
func runLie(t *testing.T, l lie) *evidence.Scenario {
	t.Helper()
	reg := scenario.Default()
	if l.variant != nil {
		reg[l.scenario] = scenario.WithLeftoverCheck(l.variant)
	}
	path := l.manifest
	if path == "" {
		path = shippedManifest
	}
	m, err := manifest.Load(path, reg)
	assert.NilError(t, err)
	cli := engineClient(t, m.Endpoint)
	skip.If(t, cli == nil, "no Docker Engine answers at %s (start one with `make engine`)", m.Endpoint)
	_, err = os.Stat(guest.DefaultBusybox)
	skip.If(t, err != nil, "Debian's static busybox is not installed at %s", guest.DefaultBusybox)
	img := sharedImage(t, cli)

	entry := manifest.Entry{Name: l.scenario}
	for _, e := range m.Scenarios {
		if e.Name == l.scenario {
			entry = e
		}
	}
	if l.params != nil {
		entry.Params = l.params
	}
	assert.NilError(t, reg.Validate(entry.Name, entry.Params))
	m.Scenarios = []manifest.Entry{entry}
	var proxy *faultproxy.Proxy
	if l.rules != nil {
		dir, err := os.MkdirTemp("", "qb-neg-")
		assert.NilError(t, err)
		t.Cleanup(func() { os.RemoveAll(dir) })
		proxy, err = faultproxy.New(dir, m.Endpoint, l.rules(t, cli)...)
		assert.NilError(t, err)
		t.Cleanup(func() { assert.Check(t, proxy.Close()) })
		m.Endpoint = proxy.Endpoint()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "run")
	run, err := qualify.Run(ctx, qualify.Config{
		Manifest: m, Output: out, Registry: reg, Engine: cli, ImageID: img, ImageSource: "manifest", Host: l.host, Stderr: testWriter{t},
	})
	assert.NilError(t, err)
	ev := scenarioEvidence(t, out, run.Run, l.scenario)
	t.Cleanup(func() { removeLeftBehind(t, cli, ev) })
	if proxy != nil {
		t.Logf("proxy fired: %+v", proxy.Fired())
	}

	var failed []string
	for _, c := range ev.Checks {
		if !c.OK {
			failed = append(failed, fmt.Sprintf("%s: want %s, got %s", c.Name, c.Want, c.Got))
		}
	}
	t.Logf("%s failed checks:\n  %s\nfailure: %s\ncleanup: %v", l.scenario, strings.Join(failed, "\n  "), ev.Failure, ev.CleanupErrors)
	assert.Equal(t, ev.Verdict.Kind, evidence.Failed)
	assert.Equal(t, run.Verdict.Kind, evidence.Failed)
	found := false
	for _, c := range ev.Checks {
		found = found || !c.OK && l.check.MatchString(c.Name)
	}
	assert.Assert(t, found, "no failed check matches %s; failed: %v; failure: %s", l.check, failed, ev.Failure)
	return ev
}

// removeLeftBehind removes, by exact ID, each resource the run recorded as
// still present (a lie can make the driver believe it removed something):
// containers first, then volumes and networks they held.
func removeLeftBehind(t *testing.T, cli *client.Client, ev *evidence.Scenario) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, roles := range [][]string{{"compute", "export"}, {"storage"}, {"network"}} {
		for _, r := range ev.Resources {
			if r.Absent != nil && *r.Absent || r.ID == "" || !contains(roles, r.Role) {
				continue
			}
			var err error
			switch r.Role {
			case "compute", "export":
				_, err = cli.ContainerRemove(ctx, r.ID, client.ContainerRemoveOptions{Force: true})
			case "storage":
				_, err = cli.VolumeRemove(ctx, r.ID, client.VolumeRemoveOptions{})
			case "network":
				_, err = cli.NetworkRemove(ctx, r.ID, client.NetworkRemoveOptions{})
			}
			if err != nil && !cerrdefs.IsNotFound(err) {
				t.Errorf("remove %s %s left behind by the lie: %v", r.Role, r.ID, err)
			}
		}
	}
	left, err := scenario.NamespaceLeftovers(ctx, cli, ev.Namespace)
	assert.Check(t, err)
	assert.Check(t, len(left) == 0, "left on the Engine: %v", left)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// rewriteJSON returns a rewrite that decodes a JSON object, lets edit
// change it and encodes it again.
func rewriteJSON(edit func(map[string]any)) func([]byte) ([]byte, error) {
	return func(body []byte) ([]byte, error) {
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			return nil, err
		}
		edit(v)
		return json.Marshal(v)
	}
}

// hostConfig returns v["HostConfig"] as an object, or nil.
func hostConfig(v map[string]any) map[string]any {
	h, _ := v["HostConfig"].(map[string]any)
	return h
}

// fakeRemove answers the n-th container removal with 200 without
// forwarding it (n = 0: every one): the driver believes the container is
// gone while the Engine never handled the request.
func fakeRemove(n int) func(*testing.T, *client.Client) []faultproxy.Rule {
	return func(*testing.T, *client.Client) []faultproxy.Rule {
		m := faultproxy.Request("DELETE", `/containers/[^/]+`)
		if n > 0 {
			m = m.Nth(n)
		}
		return []faultproxy.Rule{faultproxy.Answer(m, 200, "")}
	}
}

// lyingHost is the real host filesystem with the files whose base name is
// a key rewritten by its function: the observer reads a counter the kernel
// did not report.
type lyingHost map[string]func(string) string

func (h lyingHost) Open(name string) (fs.File, error) {
	root := os.DirFS("/")
	edit, ok := h[filepath.Base(name)]
	if !ok {
		return root.Open(name)
	}
	data, err := fs.ReadFile(root, name)
	if err != nil {
		return nil, err
	}
	return fstest.MapFS{name: {Data: []byte(edit(string(data))), Mode: 0o444}}.Open(name)
}

// zeroKey rewrites the line "<key> <n>" of a flat-keyed cgroup file to
// "<key> 0".
func zeroKey(key string) func(string) string {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + ` [0-9]+$`)
	return func(s string) string { return re.ReplaceAllString(s, key+" 0") }
}

func TestNegativeAdmission(t *testing.T) {
	// The driver's Engine reports cgroup v2; the Engine itself says v1.
	runLie(t, lie{
		scenario: "admission",
		rules: func(t *testing.T, _ *client.Client) []faultproxy.Rule {
			return []faultproxy.Rule{faultproxy.RewriteReply(faultproxy.Request("GET", `/info`), rewriteJSON(func(v map[string]any) {
				v["CgroupVersion"] = "2"
			}))}
		},
		check: regexp.MustCompile(`^cross-check: /info CgroupVersion \(driver == independent\)$`),
	})
}

func TestNegativeIsolation(t *testing.T) {
	// The Engine creates a writable root filesystem and its inspection
	// reads back the read-only root the driver asked for: the driver's
	// readback passes, the kernel's view must not.
	runLie(t, lie{
		scenario: "isolation",
		rules: func(t *testing.T, _ *client.Client) []faultproxy.Rule {
			return []faultproxy.Rule{
				faultproxy.RewriteRequest(faultproxy.Request("POST", `/containers/create`), rewriteJSON(func(v map[string]any) {
					hostConfig(v)["ReadonlyRootfs"] = false
				})),
				faultproxy.RewriteReply(faultproxy.Request("GET", `/containers/[^/]+/json`), rewriteJSON(func(v map[string]any) {
					if h := hostConfig(v); h != nil {
						h["ReadonlyRootfs"] = true
					}
				})),
			}
		},
		check: regexp.MustCompile(`^/ (read-only|write fails with EROFS)$`),
	})
}

func TestNegativeIsolationUserNamespace(t *testing.T) {
	// The Engine runs the workload without Docker's default seccomp
	// profile and reads back the options the driver asked for: the
	// driver's readback passes, and an unprivileged user (every
	// capability dropped, no_new_privs) can create a user namespace, which
	// the kernel allows by itself here. Unconfined, the seccomp mode check
	// fails too; under a filter that allows every system call the mode is
	// still 2 (filter) and the user namespace check alone says what is
	// wrong.
	for _, tc := range []struct {
		name, opt string
		// modeFails: "Seccomp mode (2 = filter)" fails as well.
		modeFails bool
	}{
		{"unconfined", "seccomp=unconfined", true},
		{"allow-all filter", `seccomp={"defaultAction":"SCMP_ACT_ALLOW"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := runLie(t, lie{
				scenario: "isolation",
				rules: func(t *testing.T, _ *client.Client) []faultproxy.Rule {
					return []faultproxy.Rule{
						faultproxy.RewriteRequest(faultproxy.Request("POST", `/containers/create`), rewriteJSON(func(v map[string]any) {
							h := hostConfig(v)
							opts, _ := h["SecurityOpt"].([]any)
							h["SecurityOpt"] = append(opts, tc.opt)
						})),
						faultproxy.RewriteReply(faultproxy.Request("GET", `/containers/[^/]+/json`), rewriteJSON(func(v map[string]any) {
							h := hostConfig(v)
							if h == nil {
								return
							}
							opts, _ := h["SecurityOpt"].([]any)
							kept := []any{}
							for _, o := range opts {
								if o != tc.opt {
									kept = append(kept, o)
								}
							}
							h["SecurityOpt"] = kept
						})),
					}
				},
				check: regexp.MustCompile(`^unprivileged user namespace refused$`),
			})
			for _, c := range ev.Checks {
				switch c.Name {
				case "unprivileged user namespace refused":
					assert.Check(t, c.Got == "created", "got %q", c.Got)
				case "Seccomp mode (2 = filter)":
					assert.Check(t, c.OK != tc.modeFails, "%+v", c)
				}
			}
		})
	}
}

func TestNegativeLifecycle(t *testing.T) {
	// The Engine misreports the process's exit code 7 as 3.
	runLie(t, lie{
		scenario: "lifecycle",
		rules: func(t *testing.T, _ *client.Client) []faultproxy.Rule {
			return []faultproxy.Rule{faultproxy.RewriteReply(faultproxy.Request("GET", `/exec/[^/]+/json`), rewriteJSON(func(v map[string]any) {
				if v["Running"] == false && v["ExitCode"] == float64(7) {
					v["ExitCode"] = 3
				}
			}))}
		},
		check: regexp.MustCompile(`^exit$`),
	})
}

func TestNegativeLifecycleRemoval(t *testing.T) {
	// Container removals are answered but never reach the Engine (a
	// single lost one is not enough: destroy removes compute again).
	runLie(t, lie{
		scenario: "lifecycle",
		rules:    fakeRemove(0),
		check:    regexp.MustCompile(`^compute [0-9a-f]{64} absent after destroy$`),
	})
}

func TestNegativeMemoryExhaustion(t *testing.T) {
	// The OOM counter does not rise.
	runLie(t, lie{
		scenario: "memory-exhaustion",
		host:     lyingHost{"memory.oom_control": zeroKey("oom_kill"), "memory.events": zeroKey("oom_kill")},
		check:    regexp.MustCompile(`^oom: observer oom_kill counter rose$`),
	})
}

func TestNegativePIDExhaustion(t *testing.T) {
	// The pids controller does not count the refused forks.
	runLie(t, lie{
		scenario: "pid-exhaustion",
		host:     lyingHost{"pids.events": zeroKey("max")},
		check:    regexp.MustCompile(`^observer pids.events max counted the refusals$`),
	})
}

func TestNegativeTmpfsBounds(t *testing.T) {
	// The Engine mounts /tmp four times larger than asked and reads back
	// the size the driver asked for.
	const asked, given = "size=8388608,", "size=33554432,"
	runLie(t, lie{
		scenario: "tmpfs-bounds",
		rules: func(t *testing.T, _ *client.Client) []faultproxy.Rule {
			return []faultproxy.Rule{
				faultproxy.RewriteRequest(faultproxy.Request("POST", `/containers/create`), func(b []byte) ([]byte, error) {
					return bytes.ReplaceAll(b, []byte(asked), []byte(given)), nil
				}),
				faultproxy.RewriteReply(faultproxy.Request("GET", `/containers/[^/]+/json`), func(b []byte) ([]byte, error) {
					return bytes.ReplaceAll(b, []byte(given), []byte(asked)), nil
				}),
			}
		},
		check: regexp.MustCompile(`^/tmp: write beyond the size fails with$`),
	})
}

func TestNegativeStreamLimits(t *testing.T) {
	// The proxy ends the first process's output stream after 4 KiB: the
	// stream ends without the driver ever enforcing the output limit.
	runLie(t, lie{
		scenario: "stream-limits",
		rules: func(t *testing.T, _ *client.Client) []faultproxy.Rule {
			return []faultproxy.Rule{faultproxy.CutStream(faultproxy.Request("POST", `/exec/[^/]+/start`).Nth(1), 4096)}
		},
		check: regexp.MustCompile(`^output: fails with output_limit$`),
	})
}

func TestNegativeCancellation(t *testing.T) {
	// The stop that abandoning the streams triggers never reaches the
	// Engine: the sandbox keeps running.
	runLie(t, lie{
		scenario: "cancellation",
		rules:    fakeRemove(1),
		check:    regexp.MustCompile(`^wait: observer: whole sandbox stopped by the driver$`),
	})
}

func TestNegativeDescendantContainment(t *testing.T) {
	// The stop never reaches the Engine: the descendants keep running.
	runLie(t, lie{
		scenario: "descendant-containment",
		rules:    fakeRemove(1),
		check:    regexp.MustCompile(`^descendants gone from the host after stop$`),
	})
}

func TestNegativeNetworkIsolation(t *testing.T) {
	// The host listener is not running: "isolated: unreachable" proves
	// nothing, and the outbound control must say so.
	runLie(t, lie{
		scenario: "network-isolation",
		variant: scenario.NetworkIsolation{Listen: func(network, address string) (net.Listener, error) {
			ln, err := net.Listen(network, address)
			if err == nil {
				ln.Close()
			}
			return ln, err
		}},
		check: regexp.MustCompile(`^outbound: host listener reachable$`),
	})
}

func TestNegativeNetworkIsolationEngineAPIReachable(t *testing.T) {
	// The Engine API listens on TCP on every host address (dockerd -H
	// tcp://0.0.0.0:port, the misconfiguration CVE-2025-9074's class
	// exploits): here a reverse proxy to the real Engine's socket on an
	// ephemeral port, which the scenario is told to probe, once over plain
	// HTTP and once over TLS without client authentication (--tls without
	// --tlsverify). The outbound sandbox reaches it, and the scenario must
	// fail for exactly the scheme the proxy serves. The proxy forwards
	// only GET /_ping: it listens on every address for the test's length,
	// and a full Engine API there would be root on this host to anyone
	// who can reach it.
	m, err := manifest.Load(shippedManifest, scenario.Default())
	assert.NilError(t, err)
	socket, ok := strings.CutPrefix(m.Endpoint, "unix://")
	skip.If(t, !ok, "endpoint %s is not a Unix socket", m.Endpoint)
	transport := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}
	t.Cleanup(transport.CloseIdleConnections)
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker" },
		Transport: transport,
	}
	for _, tc := range []struct {
		scheme string
		tls    bool
	}{{"HTTP", false}, {"TLS, no client certificate", true}} {
		t.Run(tc.scheme, func(t *testing.T) {
			ln, err := net.Listen("tcp", "0.0.0.0:0")
			assert.NilError(t, err)
			var served atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/_ping" {
					http.Error(w, "only GET /_ping is forwarded", http.StatusForbidden)
					return
				}
				served.Add(1)
				proxy.ServeHTTP(w, r)
			}))
			srv.Listener.Close()
			srv.Listener = ln
			if tc.tls {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			t.Cleanup(srv.Close)
			port := ln.Addr().(*net.TCPAddr).Port
			ev := runLie(t, lie{
				scenario: "network-isolation",
				variant:  scenario.NetworkIsolation{EngineAPIPorts: []int{port}},
				check:    regexp.MustCompile(fmt.Sprintf(`^outbound: no Engine API at the (network's gateway|default bridge's gateway|host address) [0-9.]+ port %d \(%s\)$`, port, regexp.QuoteMeta(tc.scheme))),
			})
			assert.Check(t, served.Load() >= 1, "the sandbox's probe reached the Engine API proxy")
			for _, c := range ev.Checks {
				if !c.OK {
					assert.Check(t, strings.HasSuffix(c.Name, "("+tc.scheme+")"), "failed check %q is not of the scheme served", c.Name)
				}
			}
		})
	}
}

func TestNegativeNetworkIsolationNoGateway(t *testing.T) {
	// The Engine's inspect of the outbound network names no gateway: with
	// no address to probe there, the Engine API check of the gateway
	// would pass for want of a target, so the scenario must fail instead.
	runLie(t, lie{
		scenario: "network-isolation",
		variant: scenario.NetworkIsolation{EditNetwork: func(nw *network.Inspect) {
			for i := range nw.IPAM.Config {
				nw.IPAM.Config[i].Gateway = netip.Addr{}
			}
		}},
		check: regexp.MustCompile(`^outbound: the network's gateway \(Engine IPAM\)$`),
	})
}

func TestNegativeLostEngineReplies(t *testing.T) {
	// The create is dropped before the Engine handled it: no reply was
	// lost, and the scenario must not pass as if one had been.
	runLie(t, lie{
		scenario: "lost-engine-replies",
		variant:  scenario.LostEngineReplies{CreateFault: faultproxy.DropRequest},
		check:    regexp.MustCompile(`^create: the Engine answered the create whose reply was lost \(status the proxy read\)$`),
	})
}

func TestNegativeExactCleanup(t *testing.T) {
	// Container removals are answered without the Engine removing
	// anything: the destroyed sandbox is still there.
	runLie(t, lie{
		scenario: "exact-cleanup",
		rules:    fakeRemove(0),
		check:    regexp.MustCompile(`^destroyed: compute [0-9a-f]{64} absent$`),
	})
}

// quotaIgnored is a backend that silently drops a requested workspace
// quota instead of refusing it.
type quotaIgnored struct{ sandboxapi.Backend }

func (b quotaIgnored) Reserve(req sandboxapi.Request, r sandboxapi.RecoveryPolicy) (sandboxapi.Reservation, error) {
	req.Policy.WorkspaceDiskQuota = sandboxapi.WorkspaceDiskQuota{}
	return b.Backend.Reserve(req, r)
}

func TestNegativeUnsupportedQuota(t *testing.T) {
	// The backend accepts the quota it cannot enforce.
	runLie(t, lie{
		scenario: "unsupported-quota",
		variant:  scenario.UnsupportedQuota{Wrap: func(b sandboxapi.Backend) sandboxapi.Backend { return quotaIgnored{b} }},
		check:    regexp.MustCompile(`^reserve fails with \*sandboxapi\.UnsupportedError$`),
	})
}

// flipFirstByte rewrites a tar stream with the first content byte of its
// first non-empty regular file inverted; sizes, names and modes stay. A
// stream without one (the driver's own directory set-up) passes as it is.
func flipFirstByte(body []byte) ([]byte, error) {
	tr := tar.NewReader(bytes.NewReader(body))
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	flipped := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		if !flipped && h.Typeflag == tar.TypeReg && len(data) > 0 {
			data[0] ^= 0xff
			flipped = true
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if !flipped {
		return body, nil
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func TestNegativeTransfer(t *testing.T) {
	// The Engine stores a file other than the one imported: same names,
	// sizes and modes, one byte differs.
	runLie(t, lie{
		scenario: "transfer",
		params:   map[string]any{"cases": []any{"round-trip"}, "largeFileBytes": 200000},
		rules: func(t *testing.T, _ *client.Client) []faultproxy.Rule {
			return []faultproxy.Rule{faultproxy.RewriteRequest(faultproxy.Request("PUT", `/containers/[^/]+/archive`), flipFirstByte)}
		},
		check: regexp.MustCompile(`^round-trip: export .* equals the source \(bytes, kinds, modes\)$`),
	})
}

func TestNegativeControllerDeath(t *testing.T) {
	// Recovery's removals are answered but never reach the Engine.
	t.Setenv(scenario.QualifyBinaryEnv, buildQualify(t))
	runLie(t, lie{
		scenario: "controller-death",
		params:   map[string]any{"checkpoints": []any{"exec"}},
		rules:    fakeRemove(0),
		check:    regexp.MustCompile(`^exec: no resource of the sandbox remains \(exact names and IDs\)$`),
	})
}
