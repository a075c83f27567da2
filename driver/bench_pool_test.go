package driver_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
)

// The pool's idle cost on the Engine (docs/contract.md#pool), read from the
// kernel's own accounting: the cgroup files of each compute container and
// /proc of the processes that serve it. The readers below are small and
// this file's own on purpose: which file, of which process, found how, is
// the measurement, and it has to name what it read.

const (
	// poolSettle is the pause between a full pool and the window: the last
	// starts' Engine work (and the keeper's first instants) end in it.
	poolSettle = 5 * time.Second
	// poolWindow is the window over which CPU time is taken.
	poolWindow = 20 * time.Second
)

// BenchmarkPoolIdleCost measures what a full, idle pool of N = 4 and 16
// sandboxes costs on the Engine (docs/contract.md#pool): per idle sandbox,
// the compute container's cgroup memory, CPU time over poolWindow and
// PIDs; the RSS, PSS, USS and CPU of the containerd shims serving the
// containers (each shim counted once); and the growth of dockerd's and
// containerd's RSS from before the pool to the end of the window. The
// daemons are shared with every other client of the Engine, so their
// growth is the noisiest figure. It also counts, from
// the sandboxes' recovery records, the Engine objects each one holds and
// their states. Each sample closes its pool and checks, by the records'
// exact IDs, that no resource and no shim is left. The controller's own
// heap per idle sandbox is BenchmarkWarmTTI's. Run with -benchtime 1x.
func BenchmarkPoolIdleCost(b *testing.B) {
	for _, n := range []int{4, 16} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			be := benchBackend(b)
			cli := enginetest.Client(b)
			dockerd, err := socketPeerPID(enginetest.Socket())
			if err != nil {
				b.Fatalf("dockerd: %v", err)
			}
			b.ResetTimer()
			for range b.N {
				poolIdleCostSample(b, be, cli, dockerd, n)
			}
		})
	}
}

// all returns the latest record of every sandbox the store saw.
func (s *poolStore) all() []sandboxapi.RecoveryRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sandboxapi.RecoveryRecord
	for _, r := range s.latest {
		out = append(out, r.Clone())
	}
	return out
}

// idleSandbox is what one pooled sandbox's cost is read from.
type idleSandbox struct {
	record  sandboxapi.RecoveryRecord
	compute string // compute container ID, from the record
	initPID int    // the compute's init process (ContainerInspect State.Pid)
	shimPID int    // its parent: the containerd shim serving it
	cgroup  containerCgroup
}

// idleMark is one reading of every counter a sample compares.
type idleMark struct {
	at            time.Time
	computeCPU    time.Duration // summed over the compute cgroups
	shimCPU       time.Duration // summed over the distinct shims
	dockerdCPU    time.Duration
	containerdCPU time.Duration
	computeMemory int64 // bytes, summed over the compute cgroups
	computeAnon   int64 // bytes of computeMemory that are anonymous
	computeFile   int64 // bytes of computeMemory that are page cache (tmpfs included)
	computePIDs   int64 // summed over the compute cgroups
	shimRSS       int64 // bytes, summed over the distinct shims
	shimPSS       int64 // bytes, summed over the distinct shims
	shimUSS       int64 // bytes, summed over the distinct shims
	dockerdRSS    int64 // bytes
	containerdRSS int64 // bytes
}

func poolIdleCostSample(b *testing.B, be *driver.Backend, cli *client.Client, dockerd, n int) {
	b.Helper()
	ctx := context.Background()
	dockerdBefore, err := procRSS(dockerd)
	if err != nil {
		b.Fatal(err)
	}
	containerdBefore := rssByExe("containerd")

	var st poolStore
	pool, err := sandboxapi.NewPool(be, sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.PoolOptions{
		Size: n, MaxIdle: time.Hour, StartParallelism: 2, RetryDelay: time.Second, Recovery: sandboxapi.Persisted(st.persist),
	})
	var unsupported *sandboxapi.UnsupportedError
	if errors.As(err, &unsupported) {
		// The bench backend's profile is the cgroup v1 one (newBenchBackend);
		// the readers below also read cgroup v2's files.
		b.Skipf("this Engine does not admit the bench backend's profile: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	var sandboxes []idleSandbox
	var closeOnce sync.Once
	var closeErr error
	closeAndCheck := func() {
		closeOnce.Do(func() {
			closeErr = pool.Close(context.Background())
			for _, rec := range st.all() {
				assertGone(b, rec)
			}
			assertShimsExited(b, sandboxes)
		})
	}
	b.Cleanup(closeAndCheck)
	fillPool(b, pool, n)
	b.StopTimer()

	for _, id := range pool.Idle() {
		s, err := inspectIdle(ctx, cli, st.record(id))
		if err != nil {
			b.Fatalf("sandbox %s: %v", id, err)
		}
		sandboxes = append(sandboxes, s)
	}
	if len(sandboxes) != n {
		b.Fatalf("pool holds %d idle sandboxes, want %d", len(sandboxes), n)
	}
	containerd, err := containerdOf(sandboxes[0].shimPID)
	if err != nil {
		b.Fatal(err)
	}
	objects := engineObjects(b, ctx, cli, sandboxes)

	time.Sleep(poolSettle)
	m0 := markIdle(b, sandboxes, dockerd, containerd)
	time.Sleep(poolWindow)
	m1 := markIdle(b, sandboxes, dockerd, containerd)

	closeAndCheck()
	if closeErr != nil {
		b.Fatal(closeErr)
	}
	dockerdAfter, _ := procRSS(dockerd)
	containerdAfter, _ := procRSS(containerd)

	cBefore, ok := containerdBefore[containerd]
	if !ok {
		b.Fatalf("containerd (PID %d, the peer of the shims' -address) was not running before the pool", containerd)
	}
	logIdleCost(b, idleCost{
		n: n, m0: m0, m1: m1, shims: distinctShims(sandboxes),
		dockerd: dockerd, containerd: containerd,
		dockerdBefore: dockerdBefore, containerdBefore: cBefore,
		dockerdAfter: dockerdAfter, containerdAfter: containerdAfter,
		objects: objects,
	})
}

// idleCost is one sample's readings.
type idleCost struct {
	n, shims                        int
	m0, m1                          idleMark
	dockerd, containerd             int
	dockerdBefore, containerdBefore int64
	dockerdAfter, containerdAfter   int64
	objects                         string
}

func logIdleCost(b *testing.B, c idleCost) {
	b.Helper()
	window := c.m1.at.Sub(c.m0.at)
	n := float64(c.n)
	kib := func(v int64) float64 { return float64(v) / 1024 / n }
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / window.Seconds() / n }
	memory := kib(c.m1.computeMemory)
	shim := kib(c.m1.shimRSS)
	shimPSS := kib(c.m1.shimPSS)
	shimUSS := kib(c.m1.shimUSS)
	dockerdGrowth := kib(c.m1.dockerdRSS - c.dockerdBefore)
	containerdGrowth := kib(c.m1.containerdRSS - c.containerdBefore)
	computeCPU := pct(c.m1.computeCPU - c.m0.computeCPU)
	shimCPU := pct(c.m1.shimCPU - c.m0.shimCPU)
	pids := float64(c.m1.computePIDs) / n

	// One header and one row, no rules: the testing package keeps only
	// the first 10 lines of a benchmark's log.
	var out strings.Builder
	tab := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tab, "N\tcompute cgroup memory\t(anon / page cache / kernel)\tshim RSS\tshim PSS\tshim USS\tdockerd growth\tcontainerd growth\ttotal (USS)\tcompute CPU\tshim CPU\tPIDs")
	fmt.Fprintf(tab, "%d\t%s KiB\t(%s / %s / %s)\t%s KiB\t%s KiB\t%s KiB\t%s KiB\t%s KiB\t%s KiB\t%.4f %%\t%.4f %%\t%s\n",
		c.n, num(memory), num(kib(c.m1.computeAnon)), num(kib(c.m1.computeFile)),
		num(kib(c.m1.computeMemory-c.m1.computeAnon-c.m1.computeFile)),
		num(shim), num(shimPSS), num(shimUSS), num(dockerdGrowth), num(containerdGrowth),
		num(memory+shimUSS+dockerdGrowth+containerdGrowth), computeCPU, shimCPU, num(pids))
	_ = tab.Flush()
	b.Logf("idle pool of %d, per idle sandbox (memory at the end of a %s window after %s settling; CPU over the window, in %% of one CPU):\n%s",
		c.n, window.Round(time.Millisecond), poolSettle, out.String())
	b.Logf("%d distinct containerd shims served the %d compute containers; CPU time over the window: compute cgroups %s in all, shims %s in all (10 ms ticks)",
		c.shims, c.n, c.m1.computeCPU-c.m0.computeCPU, c.m1.shimCPU-c.m0.shimCPU)
	b.Logf("Engine daemons: dockerd PID %d (the peer of %s), RSS %d KiB before the pool, %d KiB full, %d KiB after Close; CPU over the window %.2f %% of one CPU",
		c.dockerd, enginetest.Socket(), c.dockerdBefore>>10, c.m1.dockerdRSS>>10, c.dockerdAfter>>10, 100*(c.m1.dockerdCPU-c.m0.dockerdCPU).Seconds()/window.Seconds())
	b.Logf("Engine daemons: containerd PID %d (the peer of the shims' -address), RSS %d KiB before the pool, %d KiB full, %d KiB after Close; CPU over the window %.2f %% of one CPU",
		c.containerd, c.containerdBefore>>10, c.m1.containerdRSS>>10, c.containerdAfter>>10, 100*(c.m1.containerdCPU-c.m0.containerdCPU).Seconds()/window.Seconds())
	b.Logf("Engine objects per idle sandbox, from the recovery records: %s", c.objects)

	recordValue(b, "compute cgroup memory per idle sandbox", nil, memory, "KiB")
	recordValue(b, "shim RSS per idle sandbox", nil, shim, "KiB")
	recordValue(b, "shim PSS per idle sandbox", nil, shimPSS, "KiB")
	recordValue(b, "shim USS per idle sandbox", nil, shimUSS, "KiB")
	recordValue(b, "dockerd RSS growth per idle sandbox", nil, dockerdGrowth, "KiB")
	recordValue(b, "containerd RSS growth per idle sandbox", nil, containerdGrowth, "KiB")
	recordValue(b, "compute CPU per idle sandbox", nil, computeCPU, "%")
	recordValue(b, "shim CPU per idle sandbox", nil, shimCPU, "%")
	recordValue(b, "compute PIDs per idle sandbox", nil, pids, "PIDs")
}

// inspectIdle finds, from rec, the sandbox's compute container, its init
// process, the shim that is that process's parent, and its cgroup.
func inspectIdle(ctx context.Context, cli *client.Client, rec sandboxapi.RecoveryRecord) (idleSandbox, error) {
	s := idleSandbox{record: rec}
	for _, r := range rec.Resources {
		if r.Role == sandboxapi.RoleCompute && r.Identity.Kind == sandboxapi.IdentityIdentified {
			s.compute = r.Identity.ID
		}
	}
	if s.compute == "" {
		return s, errors.New("its record names no identified compute container")
	}
	res, err := cli.ContainerInspect(ctx, s.compute, client.ContainerInspectOptions{})
	if err != nil {
		return s, err
	}
	st := res.Container.State
	if st == nil || !st.Running || st.Pid <= 0 {
		return s, fmt.Errorf("compute %s is not running with an init process", s.compute)
	}
	s.initPID = st.Pid
	s.shimPID, err = procParent(s.initPID)
	if err != nil {
		return s, err
	}
	exe, err := procExe(s.shimPID)
	if err != nil {
		return s, err
	}
	if !strings.HasPrefix(filepath.Base(exe), "containerd-shim") {
		return s, fmt.Errorf("compute %s's init process %d has parent %d (%s), not a containerd shim", s.compute, s.initPID, s.shimPID, exe)
	}
	s.cgroup, err = cgroupOf(s.initPID, s.compute)
	return s, err
}

// engineObjects counts the Engine objects of every record by role and
// the state the Engine reports for each, inspected by exact ID, and
// returns them per sandbox, e.g. "compute container running 1, export
// container created 1, storage volume 1".
func engineObjects(b *testing.B, ctx context.Context, cli *client.Client, sandboxes []idleSandbox) string {
	b.Helper()
	count := map[string]int{}
	for _, s := range sandboxes {
		for _, r := range s.record.Resources {
			if r.Identity.Kind != sandboxapi.IdentityIdentified {
				b.Fatalf("sandbox %s: %s resource %s is %s, not identified", s.record.SandboxID, r.Role, r.Name, r.Identity.Kind)
			}
			var what string
			switch r.Role {
			case sandboxapi.RoleCompute, sandboxapi.RoleExport:
				res, err := cli.ContainerInspect(ctx, r.Identity.ID, client.ContainerInspectOptions{})
				if err != nil {
					b.Fatal(err)
				}
				what = fmt.Sprintf("%s container %s", r.Role, res.Container.State.Status)
			case sandboxapi.RoleStorage:
				if _, err := cli.VolumeInspect(ctx, r.Identity.ID, client.VolumeInspectOptions{}); err != nil {
					b.Fatal(err)
				}
				what = "storage volume"
			case sandboxapi.RoleNetwork:
				if _, err := cli.NetworkInspect(ctx, r.Identity.ID, client.NetworkInspectOptions{}); err != nil {
					b.Fatal(err)
				}
				what = "network"
			}
			count[what]++
		}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(count)) {
		parts = append(parts, fmt.Sprintf("%s %s", k, num(float64(count[k])/float64(len(sandboxes)))))
	}
	return strings.Join(parts, ", ")
}

func distinctShims(sandboxes []idleSandbox) int {
	seen := map[int]bool{}
	for _, s := range sandboxes {
		seen[s.shimPID] = true
	}
	return len(seen)
}

// markIdle reads every counter of the sandboxes and the daemons.
func markIdle(b *testing.B, sandboxes []idleSandbox, dockerd, containerd int) idleMark {
	b.Helper()
	m := idleMark{at: time.Now()}
	seen := map[int]bool{}
	for _, s := range sandboxes {
		cpu, err := s.cgroup.cpu()
		if err != nil {
			b.Fatal(err)
		}
		mem, err := s.cgroup.memory()
		if err != nil {
			b.Fatal(err)
		}
		anon, file, err := s.cgroup.memoryStat()
		if err != nil {
			b.Fatal(err)
		}
		m.computeAnon += anon
		m.computeFile += file
		pids, err := s.cgroup.pids()
		if err != nil {
			b.Fatal(err)
		}
		m.computeCPU += cpu
		m.computeMemory += mem
		m.computePIDs += pids
		if seen[s.shimPID] {
			continue
		}
		seen[s.shimPID] = true
		rss, err := procRSS(s.shimPID)
		if err != nil {
			b.Fatal(err)
		}
		pss, uss, err := procPSSUSS(s.shimPID)
		if err != nil {
			b.Fatal(err)
		}
		cpu, err = procCPU(s.shimPID)
		if err != nil {
			b.Fatal(err)
		}
		m.shimRSS += rss
		m.shimPSS += pss
		m.shimUSS += uss
		m.shimCPU += cpu
	}
	var err error
	if m.dockerdRSS, err = procRSS(dockerd); err != nil {
		b.Fatal(err)
	}
	if m.dockerdCPU, err = procCPU(dockerd); err != nil {
		b.Fatal(err)
	}
	if m.containerdRSS, err = procRSS(containerd); err != nil {
		b.Fatal(err)
	}
	if m.containerdCPU, err = procCPU(containerd); err != nil {
		b.Fatal(err)
	}
	return m
}

// assertShimsExited waits up to 30 s for every shim that served the
// sandboxes to exit (a shim whose PID was reused is one whose command line
// changed).
func assertShimsExited(b *testing.B, sandboxes []idleSandbox) {
	b.Helper()
	// A shim's command line names the container it was started for (-id),
	// which tells it from a process that reused its PID.
	ids := map[int][]string{}
	for _, s := range sandboxes {
		ids[s.shimPID] = append(ids[s.shimPID], s.compute)
	}
	deadline := time.Now().Add(30 * time.Second)
	for pid := range ids {
		for {
			cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			alive := err == nil && slices.ContainsFunc(ids[pid], func(id string) bool { return strings.Contains(string(cmd), id) })
			if !alive {
				break
			}
			if time.Now().After(deadline) {
				b.Errorf("containerd shim %d (%s) still runs after Close", pid, strings.ReplaceAll(string(cmd), "\x00", " "))
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// socketPeerPID connects to the unix socket at path and returns the PID of
// the process listening on it (SO_PEERCRED).
func socketPeerPID(path string) (int, error) {
	conn, err := net.Dial("unix", path)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	raw, err := conn.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, fmt.Errorf("SO_PEERCRED of %s: %w", path, credErr)
	}
	if cred.Pid <= 0 {
		return 0, fmt.Errorf("the listener on %s is in another PID namespace (peer PID %d)", path, cred.Pid)
	}
	return int(cred.Pid), nil
}

// containerdOf returns the PID of the containerd a shim reports to: the
// listener on the socket named by its -address argument.
func containerdOf(shim int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", shim))
	if err != nil {
		return 0, err
	}
	args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	i := slices.Index(args, "-address")
	if i < 0 || i+1 >= len(args) {
		return 0, fmt.Errorf("containerd shim %d has no -address argument: %q", shim, args)
	}
	pid, err := socketPeerPID(args[i+1])
	if err != nil {
		return 0, fmt.Errorf("containerd of shim %d: %w", shim, err)
	}
	return pid, nil
}

// procField returns the value of field (e.g. "VmRSS", "PPid", "Pss") in a
// "Field: value [kB]" file of /proc, without its unit.
func procField(path, field string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && k == field {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s has no %s", path, field)
}

// procRSS is the process's VmRSS in bytes: every page it maps that is
// resident, pages shared with other processes (a binary's text) included.
func procRSS(pid int) (int64, error) {
	kib, err := procField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS")
	return kib << 10, err
}

// procPSSUSS reads the process's proportional and unique set sizes in
// bytes from /proc/pid/smaps_rollup. PSS counts its resident pages, each
// shared one divided by the number of processes mapping it, so the PSS of
// every shim on the host add up to what they occupy together, and one
// shim's PSS shrinks as more shims share its binary's pages. USS counts
// only its private pages (Private_Clean + Private_Dirty): what its exit
// frees, the marginal cost of one more.
func procPSSUSS(pid int) (pss, uss int64, err error) {
	path := fmt.Sprintf("/proc/%d/smaps_rollup", pid)
	if pss, err = procField(path, "Pss"); err != nil {
		return 0, 0, err
	}
	for _, f := range []string{"Private_Clean", "Private_Dirty"} {
		kib, err := procField(path, f)
		if err != nil {
			return 0, 0, err
		}
		uss += kib
	}
	return pss << 10, uss << 10, nil
}

func procParent(pid int) (int, error) {
	ppid, err := procField(fmt.Sprintf("/proc/%d/status", pid), "PPid")
	return int(ppid), err
}

func procExe(pid int) (string, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return strings.TrimSuffix(exe, " (deleted)"), err
}

// procCPU is the process's user and system CPU time (/proc/pid/stat
// utime and stime, in the kernel's fixed USER_HZ of 100 ticks per second).
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields count from after it.
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data)[i+1:])
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime: fields 14 and 15
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// rssByExe returns the RSS in bytes of every process whose executable's
// base name is name, by PID.
func rssByExe(name string) map[int]int64 {
	out := map[int]int64{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if exe, err := procExe(pid); err != nil || filepath.Base(exe) != name {
			continue
		}
		if rss, err := procRSS(pid); err == nil {
			out[pid] = rss
		}
	}
	return out
}

// containerCgroup is one container's cgroup directories: cgroup v1's
// memory, cpuacct and pids hierarchies, or the one cgroup v2 directory in
// all three.
type containerCgroup struct {
	v2                  bool
	memDir, cpuDir, pid string
}

// cgroupOf finds the cgroup of process pid (/proc/pid/cgroup, as seen from
// this process's cgroup namespace) under this process's cgroup mounts
// (/proc/self/mountinfo), and requires its path to name the container id,
// so the files read are that container's.
func cgroupOf(pid int, id string) (containerCgroup, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return containerCgroup{}, err
	}
	v1 := map[string]string{} // controller -> path
	var unified string
	for line := range strings.Lines(string(data)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			unified = f[2]
		}
		for _, c := range strings.Split(f[1], ",") {
			v1[c] = f[2]
		}
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return containerCgroup{}, err
	}
	var cg containerCgroup
	if _, ok := v1["memory"]; ok {
		for _, c := range []struct {
			controller string
			dir        *string
		}{{"memory", &cg.memDir}, {"cpuacct", &cg.cpuDir}, {"pids", &cg.pid}} {
			if *c.dir, err = mounts.dir(c.controller, v1[c.controller]); err != nil {
				return cg, err
			}
		}
	} else if unified != "" {
		dir, err := mounts.dir("", unified)
		if err != nil {
			return cg, err
		}
		cg = containerCgroup{v2: true, memDir: dir, cpuDir: dir, pid: dir}
	} else {
		return cg, fmt.Errorf("/proc/%d/cgroup names neither a cgroup v1 memory controller nor a cgroup v2 path: %q", pid, data)
	}
	for _, d := range []string{cg.memDir, cg.cpuDir, cg.pid} {
		if !strings.Contains(d, id) {
			return cg, fmt.Errorf("cgroup directory %s of process %d does not name its container %s", d, pid, id)
		}
	}
	return cg, nil
}

// cgroupMount is one cgroup file system mount: its root within the
// hierarchy and where it is mounted.
type cgroupMount struct{ root, point string }

// cgroupMountTable maps a cgroup v1 controller, or "" for cgroup v2, to
// its mount.
type cgroupMountTable map[string]cgroupMount

func cgroupMounts() (cgroupMountTable, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	t := cgroupMountTable{}
	for line := range strings.Lines(string(data)) {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		m := cgroupMount{root: f[3], point: f[4]}
		switch g[0] {
		case "cgroup2":
			t[""] = m
		case "cgroup":
			for _, opt := range strings.Split(g[2], ",") {
				t[opt] = m
			}
		}
	}
	return t, nil
}

// dir returns the directory of cgroup path in controller's hierarchy.
func (t cgroupMountTable) dir(controller, path string) (string, error) {
	m, ok := t[controller]
	if !ok {
		if controller == "" {
			controller = "cgroup2"
		}
		return "", fmt.Errorf("no %s cgroup mount in /proc/self/mountinfo", controller)
	}
	rel, ok := strings.CutPrefix(path, m.root)
	if !ok {
		return "", fmt.Errorf("cgroup %s lies outside the %s mount's root %s", path, m.point, m.root)
	}
	return filepath.Join(m.point, rel), nil
}

// memory is the cgroup's memory usage in bytes: memory.usage_in_bytes
// (v1) or memory.current (v2), page cache included.
func (c containerCgroup) memory() (int64, error) {
	if c.v2 {
		return readInt(filepath.Join(c.memDir, "memory.current"))
	}
	return readInt(filepath.Join(c.memDir, "memory.usage_in_bytes"))
}

// memoryStat splits the cgroup's memory into anonymous memory and page
// cache (tmpfs included): memory.stat's rss and cache (v1) or anon and
// file (v2), in bytes.
func (c containerCgroup) memoryStat() (anon, file int64, err error) {
	p := filepath.Join(c.memDir, "memory.stat")
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, 0, err
	}
	anonKey, fileKey := "rss", "cache"
	if c.v2 {
		anonKey, fileKey = "anon", "file"
	}
	found := 0
	for line := range strings.Lines(string(data)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		var dst *int64
		switch k {
		case anonKey:
			dst = &anon
		case fileKey:
			dst = &file
		default:
			continue
		}
		if *dst, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("%s: %s: %w", p, k, err)
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("%s lacks %s or %s", p, anonKey, fileKey)
	}
	return anon, file, nil
}

// cpu is the CPU time the cgroup's processes used: cpuacct.usage (v1, ns)
// or cpu.stat's usage_usec (v2).
func (c containerCgroup) cpu() (time.Duration, error) {
	if !c.v2 {
		ns, err := readInt(filepath.Join(c.cpuDir, "cpuacct.usage"))
		return time.Duration(ns), err
	}
	p := filepath.Join(c.cpuDir, "cpu.stat")
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "usage_usec "); ok {
			us, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond, err
		}
	}
	return 0, fmt.Errorf("%s has no usage_usec", p)
}

// pids is the number of tasks in the cgroup (pids.current).
func (c containerCgroup) pids() (int64, error) {
	return readInt(filepath.Join(c.pid, "pids.current"))
}

func readInt(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}
