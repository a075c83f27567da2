package scenario

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/dataset"
	"github.com/qualbox/qualbox/qualify/guest/facts"
	"github.com/qualbox/qualbox/sandboxapi"
)

// Datasets qualifies shared read-only datasets (docs/contract.md#datasets)
// on an Engine with image mounts: a data-only image of another
// architecture than the workload, built here with no registry, attached
// to two sibling sandboxes whole ("ref") and through an internal symlink
// alias ("aliased", subpath "alias"). Both see identical content; writes
// fail with EROFS; each workspace stays private; exports carry workspace
// files only; one sibling survives the other's destroy; a subpath whose
// symlink leaves the image is refused; the driver never deletes the
// image; and a fresh controller cleans up a sandbox whose dataset image
// was removed under it. The requested and effective mount inventory of
// every compute container is evidence.
//
// On an Engine that cannot attach datasets the verdict is not_applicable
// with the admission error as its reason; any other admission failure
// fails the scenario. The scenario depends only on the manifest profile,
// so it runs unchanged wherever that profile is admitted.
type Datasets struct{}

// DatasetsParams are the datasets scenario's manifest params.
type DatasetsParams struct {
	// Architecture is the dataset images' GOARCH; default: arm64 when the
	// profile's workload image is amd64, else amd64, so the dataset never
	// matches the workload.
	Architecture string `json:"architecture,omitempty"`
}

// Name returns "datasets".
func (Datasets) Name() string { return "datasets" }

func (Datasets) params(raw map[string]any) (DatasetsParams, error) {
	var p DatasetsParams
	if err := DecodeParams(raw, &p); err != nil {
		return p, err
	}
	if p.Architecture != "" && p.Architecture != "amd64" && p.Architecture != "arm64" {
		return p, fmt.Errorf("params.architecture: want amd64 or arm64, got %q", p.Architecture)
	}
	return p, nil
}

// Validate checks params (architecture).
func (s Datasets) Validate(params map[string]any) error {
	_, err := s.params(params)
	return err
}

// datasetsScript is every sibling's one process: phase 1 reads the
// datasets, tries two writes and writes its private file; it then waits
// for one stdin line (EOF also continues) and phase 2 reads everything
// again. Each probe call prints one result line.
const datasetsScript = `P=` + ProbePath + `
$P tree /datasets/ref; $P tree /datasets/aliased
$P fill /datasets/ref/new-file 1; $P fill /datasets/ref/corpus/a.txt 1
$P fill /workspace/work/private-$1 16; $P tree /workspace/work
read go
$P tree /datasets/ref; $P tree /datasets/aliased; $P tree /workspace/work`

const datasetsPhase1, datasetsPhase2 = 6, 3

// Run builds the dataset images and runs the cases.
func (s Datasets) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	p, err := s.params(params)
	if err != nil {
		return err
	}
	prof, err := profiles.Load(env.Profile)
	if err != nil {
		return err
	}
	arch := p.Architecture
	if arch == "" {
		arch = "arm64"
		if prof.Image.Architecture == "arm64" {
			arch = "amd64"
		}
	}
	rec.Request("dataset architecture", arch)
	rec.Request("workload architecture", prof.Image.Architecture)

	// Image builds and removals mutate the Engine, so they use their own
	// client; env.Engine stays read-only. It speaks the profile's daemon
	// API version, pinned as the driver pins its own: the builds need no
	// image mounts, and an Engine too old for datasets must still get as
	// far as the driver's admission, which refuses it by name.
	cli, err := client.New(client.WithHost(env.Endpoint), client.WithAPIVersion(prof.Daemon.MinAPIVersion))
	if err != nil {
		return err
	}
	defer cli.Close()
	spec := dataset.Reference(arch)
	ref, err := dataset.Build(ctx, cli, spec)
	if err != nil {
		return fmt.Errorf("build dataset image: %w", err)
	}
	refRemoved := false
	defer func() {
		if !refRemoved {
			cctx, cancel := cleanupContext(ctx, env.Policy)
			defer cancel()
			rec.CleanupError("remove dataset image "+ref.ID, dataset.Remove(cctx, cli, ref.ID))
		}
	}()
	rec.Observe("dataset image", map[string]any{"id": ref.ID, "architecture": ref.Architecture, "entries": spec.Paths()})
	alias := "alias"
	shared := []driver.Dataset{{Name: "ref", ImageID: ref.ID}, {Name: "aliased", ImageID: ref.ID, Subpath: &alias}}
	rec.Request("datasets", shared)

	backend, err := datasetBackend(env, "shared", shared)
	if err != nil {
		return err
	}
	defer backend.Close()
	adm, err := backend.Admit(ctx)
	rec.Observe("admission", adm)
	if reason, applicable := datasetsApplicable(err); !applicable {
		rec.NotApplicable(reason)
		return nil
	}
	if !rec.Check("admission with datasets", "admitted", errText(err), err == nil) {
		return nil
	}
	for _, c := range adm.Checks {
		if strings.HasPrefix(c.Name, "datasets: ") || strings.HasPrefix(c.Name, "dataset ") {
			rec.Check("admission: "+c.Name, c.Want, c.Got, c.OK)
		}
	}

	if err := datasetSiblings(ctx, env, rec, backend, cli, ref, spec); err != nil {
		return err
	}
	if err := datasetEscape(ctx, env, rec, ref); err != nil {
		return err
	}
	if err := datasetRecovery(ctx, env, rec, cli, arch); err != nil {
		return err
	}
	_, err = env.Engine.ImageInspect(ctx, ref.ID)
	rec.Check("dataset image "+ref.ID+" still present after every sandbox is gone (never deleted by the driver)", "present", errText(err), err == nil)
	cctx, cancel := cleanupContext(ctx, env.Policy)
	defer cancel()
	refRemoved = true
	rec.CleanupError("remove dataset image "+ref.ID, dataset.Remove(cctx, cli, ref.ID))
	return nil
}

// datasetsApplicable reads an admission error: ok for nil, not applicable
// (with the error as reason) when only dataset rows failed. Any other
// failure is applicable, and the caller's admission check fails on it.
func datasetsApplicable(err error) (reason string, applicable bool) {
	var admErr *driver.AdmissionError
	if err == nil || !errors.As(err, &admErr) || len(admErr.Failed) == 0 {
		return "", true
	}
	for _, c := range admErr.Failed {
		if !strings.HasPrefix(c.Name, "datasets: ") {
			return "", true
		}
	}
	return err.Error(), false
}

// datasetBackend is env.Backend with datasets, spilling to <Dir>/<name>-spill.
func datasetBackend(env *Env, name string, datasets []driver.Dataset) (*driver.Backend, error) {
	spill := filepath.Join(env.Dir, name+"-spill")
	if err := mkdirPrivate(spill); err != nil {
		return nil, err
	}
	return driver.New(driver.Config{
		Profile: env.Profile, Endpoint: env.Endpoint, Namespace: env.Namespace,
		SpillDirectory: spill, ImageID: env.ImageID, User: env.User, Datasets: datasets,
	})
}

// sibling is one started sandbox of the shared-dataset case with its one
// process running datasetsScript.
type sibling struct {
	name    string
	res     sandboxapi.Reservation
	sb      sandboxapi.Sandbox
	proc    sandboxapi.Process
	results chan facts.Result
	readErr chan error
	stderr  bytes.Buffer
	errDone chan struct{}
}

func startSibling(ctx context.Context, env *Env, rec *Record, b *driver.Backend, name string) (*sibling, error) {
	s := &sibling{name: name}
	res, err := b.Reserve(env.Request(), sandboxapi.InProcess())
	if err != nil {
		return s, fmt.Errorf("%s: reserve: %w", name, err)
	}
	s.res = res
	rec.Track(res)
	env.Log("starting dataset sibling %s (%s)", name, res.ID())
	if s.sb, err = res.Start(ctx); err != nil {
		return s, fmt.Errorf("%s: start: %w", name, err)
	}
	pr, err := s.sb.ReserveProcess(sandboxapi.ProcessSpec{
		Executable: "/bin/sh", Args: []string{"-c", datasetsScript, "datasets", name}, Env: map[string]string{}, Cwd: driver.WorkPath,
	})
	if err != nil {
		return s, fmt.Errorf("%s: reserve process: %w", name, err)
	}
	if s.proc, err = pr.Start(ctx); err != nil {
		return s, fmt.Errorf("%s: start process: %w", name, err)
	}
	s.results, s.readErr, s.errDone = make(chan facts.Result, 16), make(chan error, 1), make(chan struct{})
	go func() {
		defer close(s.errDone)
		_, _ = io.Copy(&s.stderr, io.LimitReader(s.proc.Stderr(), maxCapture))
	}()
	go func() {
		sc := bufio.NewScanner(s.proc.Stdout())
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var r facts.Result
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				s.readErr <- fmt.Errorf("%s: probe line %q: %w", name, sc.Bytes(), err)
				return
			}
			s.results <- r
		}
		s.readErr <- sc.Err()
		close(s.results)
	}()
	return s, nil
}

// next returns the next n probe results, or an error when the process's
// stdout ends first or a minute passes.
func (s *sibling) next(ctx context.Context, n int) ([]facts.Result, error) {
	var out []facts.Result
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for len(out) < n {
		select {
		case r, ok := <-s.results:
			if !ok {
				return out, fmt.Errorf("%s: stdout ended after %d of %d results; stderr %q", s.name, len(out), n, s.stderr.String())
			}
			out = append(out, r)
		case <-timeout.C:
			return out, fmt.Errorf("%s: %d of %d results after a minute", s.name, len(out), n)
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
	return out, nil
}

// finish lets phase 2 run (one stdin line, then EOF), reads its results
// and the exit receipt.
func (s *sibling) finish(ctx context.Context) ([]facts.Result, sandboxapi.Exit, error) {
	_, werr := io.WriteString(s.proc.Stdin(), "go\n")
	cerr := s.proc.Stdin().Close()
	rs, err := s.next(ctx, datasetsPhase2)
	if err != nil {
		return rs, sandboxapi.Exit{}, errors.Join(werr, cerr, err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	exit, err := s.proc.Wait(wctx)
	if err != nil {
		// The stream may stay open (no receipt): end the readers so the
		// stderr copy returns.
		s.proc.Stdout().Close()
		s.proc.Stderr().Close()
	}
	<-s.errDone
	return rs, exit, errors.Join(werr, cerr, err)
}

func (s *sibling) destroy(ctx context.Context, env *Env) (stopErr, destroyErr error) {
	if s.res == nil {
		return nil, nil
	}
	return stopAndDestroy(ctx, env.Policy, s.res)
}

// computeID is the sibling's identified compute container ID, or "".
func computeID(owner sandboxapi.CleanupOwner) string {
	for _, r := range owner.RecoveryRecord().Resources {
		if r.Role == sandboxapi.RoleCompute && r.Identity.Kind == sandboxapi.IdentityIdentified {
			return r.Identity.ID
		}
	}
	return ""
}

func exportID(owner sandboxapi.CleanupOwner) string {
	for _, r := range owner.RecoveryRecord().Resources {
		if r.Role == sandboxapi.RoleExport && r.Identity.Kind == sandboxapi.IdentityIdentified {
			return r.Identity.ID
		}
	}
	return ""
}

// MountInventory is one container's mounts as the Engine reads them back:
// what was requested (HostConfig.Mounts) and what is in effect (Mounts).
type MountInventory struct {
	Container string                 `json:"container"`
	Requested []mount.Mount          `json:"requested"`
	Effective []container.MountPoint `json:"effective"`
}

func readInventory(ctx context.Context, cli *client.Client, id string) (MountInventory, error) {
	in, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return MountInventory{}, err
	}
	inv := MountInventory{Container: id, Effective: in.Container.Mounts}
	if in.Container.HostConfig != nil {
		inv.Requested = in.Container.HostConfig.Mounts
	}
	return inv, nil
}

// datasetMountProblems compares an inventory's image mounts with the
// selected datasets: each requested exactly once (image type, exact image
// ID, read-only, subpath as selected) and in effect read-only with the
// image ID as its name and rprivate propagation; and no other image mount.
// It returns one line per difference: the requested image mounts'
// (requestedMountProblems), each selected dataset's
// (datasetTargetProblems), then the effective image mounts not selected.
func datasetMountProblems(inv MountInventory, datasets []driver.Dataset) []string {
	wantTargets := map[string]driver.Dataset{}
	for _, d := range datasets {
		wantTargets["/datasets/"+d.Name] = d
	}
	problems := requestedMountProblems(inv, wantTargets)
	for target, d := range wantTargets {
		problems = append(problems, datasetTargetProblems(inv, target, d)...)
	}
	for _, e := range inv.Effective {
		if _, ok := wantTargets[e.Destination]; !ok && e.Type == mount.TypeImage {
			problems = append(problems, fmt.Sprintf("effective image mount at %s was not selected", e.Destination))
		}
	}
	return problems
}

// requestedMountProblems checks each requested image mount is at a
// selected dataset's target, from its exact image ID, read-only, with its
// subpath.
func requestedMountProblems(inv MountInventory, wantTargets map[string]driver.Dataset) []string {
	var problems []string
	for _, m := range inv.Requested {
		if m.Type != mount.TypeImage {
			continue
		}
		d, ok := wantTargets[m.Target]
		if !ok {
			problems = append(problems, fmt.Sprintf("requested image mount at %s was not selected", m.Target))
			continue
		}
		var sub, wantSub string
		if m.ImageOptions != nil {
			sub = m.ImageOptions.Subpath
		}
		if d.Subpath != nil {
			wantSub = *d.Subpath
		}
		if m.Source != d.ImageID || !m.ReadOnly || sub != wantSub {
			problems = append(problems, fmt.Sprintf("requested %s: source %s read-only %t subpath %q, want %s true %q", m.Target, m.Source, m.ReadOnly, sub, d.ImageID, wantSub))
		}
	}
	return problems
}

// datasetTargetProblems checks dataset d's target holds exactly one
// requested mount and one effective image mount: read-only, named by the
// image ID, rprivate.
func datasetTargetProblems(inv MountInventory, target string, d driver.Dataset) []string {
	var problems []string
	n := 0
	for _, m := range inv.Requested {
		if m.Target == target {
			n++
		}
	}
	if n != 1 {
		problems = append(problems, fmt.Sprintf("requested %s: %d mounts, want 1", target, n))
	}
	var eff []container.MountPoint
	for _, m := range inv.Effective {
		if m.Destination == target {
			eff = append(eff, m)
		}
	}
	if len(eff) != 1 {
		return append(problems, fmt.Sprintf("effective %s: %d mounts, want 1", target, len(eff)))
	}
	e := eff[0]
	if e.Type != mount.TypeImage || e.Name != d.ImageID || e.RW || e.Propagation != mount.PropagationRPrivate {
		problems = append(problems, fmt.Sprintf("effective %s: type %s name %s rw %t propagation %q, want image %s false rprivate", target, e.Type, e.Name, e.RW, e.Propagation, d.ImageID))
	}
	return problems
}

// treeLines renders a probe tree result for comparison; a failed walk is
// one "error: ..." line.
func treeLines(r facts.Result) []string {
	if !r.OK {
		return []string{"error: " + r.Errno + " " + r.Error}
	}
	return lines(r.Tree)
}

// exportDatasetLeaks returns the exported paths that are dataset content
// or live under a /datasets mount: a workspace export must have neither.
func exportDatasetLeaks(exported []treeEntry, spec dataset.Spec) []string {
	var leaks []string
	names := spec.Paths()
	for _, e := range exported {
		rel := strings.TrimPrefix(e.Path, "work/")
		if strings.HasPrefix(e.Path, "datasets") || slices.Contains(names, rel) || slices.Contains(names, e.Path) {
			leaks = append(leaks, e.Path)
		}
	}
	return leaks
}

func datasetSiblings(ctx context.Context, env *Env, rec *Record, b *driver.Backend, cli *client.Client, ref dataset.Image, spec dataset.Spec) error {
	a, err := startSibling(ctx, env, rec, b, "a")
	defer func() {
		stopErr, destroyErr := a.destroy(ctx, env)
		rec.CleanupError("a: stop", stopErr)
		rec.CleanupError("a: destroy", destroyErr)
	}()
	if err != nil {
		return err
	}
	bs, err := startSibling(ctx, env, rec, b, "b")
	defer func() {
		stopErr, destroyErr := bs.destroy(ctx, env)
		rec.CleanupError("b: stop", stopErr)
		rec.CleanupError("b: destroy", destroyErr)
	}()
	if err != nil {
		return err
	}
	selected := []driver.Dataset{{Name: "ref", ImageID: ref.ID}, {Name: "aliased", ImageID: ref.ID, Subpath: ptr("alias")}}
	for _, s := range []*sibling{a, bs} {
		inv, err := readInventory(ctx, env.Engine, computeID(s.res))
		if err != nil {
			return fmt.Errorf("%s: inspect compute: %w", s.name, err)
		}
		rec.Observe("mount inventory: "+s.name+" compute", inv)
		problems := datasetMountProblems(inv, selected)
		rec.Check(s.name+": compute requests and mounts exactly the selected datasets read-only", "no difference", problems, len(problems) == 0)
		acc, err := readInventory(ctx, env.Engine, exportID(s.res))
		if err != nil {
			return fmt.Errorf("%s: inspect export accessor: %w", s.name, err)
		}
		rec.Observe("mount inventory: "+s.name+" export accessor", acc)
		problems = datasetMountProblems(acc, nil)
		rec.Check(s.name+": export accessor mounts no dataset", "no image mount", problems, len(problems) == 0)
	}

	b1, err := bs.next(ctx, datasetsPhase1)
	if err != nil {
		return err
	}
	a1, err := a.next(ctx, datasetsPhase1)
	if err != nil {
		return err
	}
	rootWant, _ := spec.Expected("")
	aliasWant, _ := spec.Expected("alias")
	for _, x := range []struct {
		name string
		rs   []facts.Result
	}{{"a", a1}, {"b", b1}} {
		rec.Observe(x.name+": phase 1 probe results", x.rs)
		rec.Equal(x.name+": /datasets/ref shows the image's exact content", lines(rootWant), treeLines(x.rs[0]))
		rec.Equal(x.name+": /datasets/aliased (subpath alias -> corpus) shows corpus from inside the image", lines(aliasWant), treeLines(x.rs[1]))
		rec.Equal(x.name+": creating a file in a dataset fails read-only", "EROFS", x.rs[2].Errno)
		rec.Equal(x.name+": truncating a dataset file fails read-only", "EROFS", x.rs[3].Errno)
		rec.Check(x.name+": writing its private workspace file", "ok", x.rs[4].Outcome, x.rs[4].OK)
		rec.Equal(x.name+": its workspace holds only its own file", []string{"dir 0755 .", "file 0600 private-" + x.name + " 16 " + sixteenZeros}, treeLines(x.rs[5]))
	}
	rec.Equal("a and b see identical shared content", treeLines(a1[0]), treeLines(b1[0]))

	// a's second phase runs on EOF right away.
	a2, aExit, err := a.finish(ctx)
	if err != nil {
		return err
	}
	rec.Equal("a: exit", sandboxapi.Exited(0).String(), aExit.String())
	rec.Equal("a: dataset unchanged after the refused writes", lines(rootWant), treeLines(a2[0]))

	stopErr := a.sb.Stop(ctx)
	if !rec.Check("a: stop compute", "nil", errText(stopErr), stopErr == nil) {
		return nil
	}
	tr, err := transferer(a.sb)
	if err != nil {
		return err
	}
	dest := filepath.Join(env.Dir, "export-a")
	err = tr.ExportTree(ctx, sandboxapi.Whole(), sandboxapi.DirSink(dest), sandboxapi.TransferOptions{})
	if rec.Check("a: export whole workspace", "nil", errText(err), err == nil) {
		got, err := listTree(dest)
		if err != nil {
			return err
		}
		rec.Observe("a: exported workspace", got)
		rec.Equal("a: export holds exactly its workspace file", []string{"file 0600 private-a 16 " + sixteenZeros}, exportLines(got))
		leaks := exportDatasetLeaks(got, spec)
		rec.Check("a: export contains no dataset file", "none", leaks, len(leaks) == 0)
	}
	stopErr, destroyErr := a.destroy(ctx, env)
	rec.Check("a: destroy", "nil", errText(errors.Join(stopErr, destroyErr)), stopErr == nil && destroyErr == nil)
	for _, r := range Resources(a.res) {
		absent, probe, err := CheckAbsent(ctx, env.Engine, r)
		if err != nil {
			return err
		}
		rec.Check(fmt.Sprintf("a: %s %s absent after destroy", r.Role, r.ID), "404", probe, absent)
	}
	_, err = env.Engine.ImageInspect(ctx, ref.ID)
	rec.Check("dataset image present after a's destroy", "present", errText(err), err == nil)

	b2, bExit, err := bs.finish(ctx)
	if err != nil {
		return err
	}
	rec.Observe("b: phase 2 probe results", b2)
	rec.Equal("b: exit", sandboxapi.Exited(0).String(), bExit.String())
	rec.Equal("b survives a's destroy: /datasets/ref unchanged", lines(rootWant), treeLines(b2[0]))
	rec.Equal("b survives a's destroy: /datasets/aliased unchanged", lines(aliasWant), treeLines(b2[1]))
	rec.Equal("b survives a's destroy: its workspace unchanged", []string{"dir 0755 .", "file 0600 private-b 16 " + sixteenZeros}, treeLines(b2[2]))
	return nil
}

// sixteenZeros is the SHA-256 of the 16 zero bytes the probe's fill writes.
const sixteenZeros = "374708fff7719dd5979ec875d56cd2286f6d3cf7ec317a3b25632aab28ec37bb"

func exportLines(es []treeEntry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		s := e.Kind + " " + e.Mode + " " + e.Path
		if e.Kind == "file" {
			s += fmt.Sprintf(" %d %s", e.Size, e.SHA256)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func ptr[T any](v T) *T { return &v }

// datasetEscape attaches the image through "escape", a symlink whose
// target climbs out of any image root: the sandbox must not start, and
// nothing may be left behind (the runner checks every tracked resource).
func datasetEscape(ctx context.Context, env *Env, rec *Record, ref dataset.Image) error {
	b, err := datasetBackend(env, "escape", []driver.Dataset{{Name: "escape", ImageID: ref.ID, Subpath: ptr("escape")}})
	if err != nil {
		return err
	}
	defer b.Close()
	res, err := b.Reserve(env.Request(), sandboxapi.InProcess())
	if err != nil {
		return fmt.Errorf("escape: reserve: %w", err)
	}
	rec.Track(res)
	sb, err := res.Start(ctx)
	stopErr, destroyErr := stopAndDestroy(ctx, env.Policy, res)
	rec.CleanupError("escape: stop", stopErr)
	rec.CleanupError("escape: destroy", destroyErr)
	rec.Observe("escape: start error", errText(err))
	var subErr *driver.DatasetSubpathError
	typed := errors.As(err, &subErr)
	rec.Check("subpath escape (symlink out of the image) is refused at start", "*driver.DatasetSubpathError naming dataset escape",
		errText(err), sb == nil && typed && len(subErr.Datasets) == 1 && subErr.Datasets[0].Name == "escape")
	// The Engine's own refusal names its data root; the driver's must not
	// pass on anything of the Engine's host.
	rec.Check("subpath refusal names no Engine host path", "no data-root path or Engine wording",
		errText(err), err != nil && !strings.Contains(errText(err), "/var/lib") && !strings.Contains(errText(err), "base directory"))
	return nil
}

// datasetRecovery starts a sandbox on its own dataset image, removes that
// image by exact ID while the sandbox holds it, and lets a fresh
// controller reconcile the persisted record and destroy everything.
func datasetRecovery(ctx context.Context, env *Env, rec *Record, cli *client.Client, arch string) error {
	img, err := dataset.Build(ctx, cli, dataset.Reference(arch))
	if err != nil {
		return fmt.Errorf("build recovery dataset image: %w", err)
	}
	removed := false
	defer func() {
		if !removed {
			cctx, cancel := cleanupContext(ctx, env.Policy)
			defer cancel()
			rec.CleanupError("remove recovery dataset image "+img.ID, dataset.Remove(cctx, cli, img.ID))
		}
	}()
	ds := []driver.Dataset{{Name: "ref", ImageID: img.ID, Subpath: ptr("corpus")}}
	first, err := datasetBackend(env, "recovery", ds)
	if err != nil {
		return err
	}
	defer first.Close()
	var st persisted
	res, err := first.Reserve(env.Request(), sandboxapi.Persisted(st.persist))
	if err != nil {
		return fmt.Errorf("recovery: reserve: %w", err)
	}
	rec.Track(res)
	if _, err := res.Start(ctx); err != nil {
		stopErr, destroyErr := stopAndDestroy(ctx, env.Policy, res)
		rec.CleanupError("recovery: stop", stopErr)
		rec.CleanupError("recovery: destroy", destroyErr)
		return fmt.Errorf("recovery: start: %w", err)
	}
	running := st.latest()
	err = dataset.Remove(ctx, cli, img.ID)
	how := "while the compute container runs"
	if cerrdefs.IsConflict(err) {
		// An Engine that keeps an image mount's image while the container
		// exists: remove the compute container first (as a crashed
		// controller's stop might have), then the image.
		rec.Observe("recovery: image removal while running", errText(err))
		if serr := res.Stop(ctx); serr != nil {
			return fmt.Errorf("recovery: stop before image removal: %w", serr)
		}
		running = st.latest()
		err = dataset.Remove(ctx, cli, img.ID)
		how = "after the compute container was stopped"
	}
	removed = err == nil
	rec.Observe("recovery: dataset image removed", how)
	if !rec.Check("recovery: dataset image "+img.ID+" removed by exact ID", "nil", errText(err), err == nil) {
		stopErr, destroyErr := stopAndDestroy(ctx, env.Policy, res)
		rec.CleanupError("recovery: stop", stopErr)
		rec.CleanupError("recovery: destroy", destroyErr)
		return nil
	}
	fresh, err := datasetBackend(env, "recovery", ds)
	if err != nil {
		return err
	}
	defer fresh.Close()
	recon, err := fresh.Reconcile(ctx, running)
	if err != nil || recon.Owner == nil {
		rec.Check("recovery: fresh controller reconciles the record", "matched owner", fmt.Sprintf("%s %s %s", recon.Kind, recon.Reason, errText(err)), false)
		stopErr, destroyErr := stopAndDestroy(ctx, env.Policy, res)
		rec.CleanupError("recovery: stop", stopErr)
		rec.CleanupError("recovery: destroy", destroyErr)
		return nil
	}
	rec.Track(recon.Owner)
	rec.Equal("recovery: fresh controller reconciles the record", string(sandboxapi.ReconciliationMatched), string(recon.Kind))
	stopErr, destroyErr := stopAndDestroy(ctx, env.Policy, recon.Owner)
	rec.Check("recovery: cleanup without the dataset image", "nil", errText(errors.Join(stopErr, destroyErr)), stopErr == nil && destroyErr == nil)
	for _, r := range Resources(recon.Owner) {
		absent, probe, err := CheckAbsent(ctx, env.Engine, r)
		if err != nil {
			return err
		}
		rec.Check(fmt.Sprintf("recovery: %s %s absent", r.Role, r.ID), "404", probe, absent)
	}
	// The first owner's view is stale; its Destroy finds nothing left.
	stopErr, destroyErr = stopAndDestroy(ctx, env.Policy, res)
	rec.CleanupError("recovery: original owner stop", stopErr)
	rec.CleanupError("recovery: original owner destroy", destroyErr)
	return nil
}

func mkdirPrivate(dir string) error { return os.MkdirAll(dir, 0o700) }

// persisted is an in-memory durable store of recovery records.
type persisted struct {
	mu      sync.Mutex
	records []sandboxapi.RecoveryRecord
}

func (p *persisted) persist(_ context.Context, r sandboxapi.RecoveryRecord) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.records = append(p.records, r.Clone())
	return nil
}

func (p *persisted) latest() sandboxapi.RecoveryRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.records[len(p.records)-1].Clone()
}
