package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// Admission qualifies driver admission
// (docs/contract.md#profiles-and-admission): the manifest profile must be
// admitted with every check passing, and each profile in params.reject must be
// rejected by this Engine with an *driver.AdmissionError whose failed checks
// include params.mustFail.
type Admission struct{}

// AdmissionParams are the admission scenario's manifest params.
type AdmissionParams struct {
	// Reject lists profiles this Engine must reject; default ["linux-x64"]
	// (the reference cgroup v2/systemd/AppArmor profile;
	// docs/qualification.md#profiles).
	Reject []string `json:"reject,omitempty"`
	// MustFail lists check names every rejection must include; default
	// ["/info CgroupVersion", "/info CgroupDriver"].
	MustFail []string `json:"mustFail,omitempty"`
	// AsController admits each rejected profile as its own controller
	// platform (driver.Backend.AdmitAs) rather than as this process's, so
	// that the rejection is decided by the Engine's facts and not by the
	// controller row alone. For a controller platform no other profile
	// has (linux/arm64: every other Linux profile is linux/amd64).
	AsController bool `json:"asController,omitempty"`
}

// Name returns "admission".
func (Admission) Name() string { return "admission" }

func (Admission) params(raw map[string]any) (AdmissionParams, error) {
	var p AdmissionParams
	if err := DecodeParams(raw, &p); err != nil {
		return p, err
	}
	if p.Reject == nil {
		p.Reject = []string{"linux-x64"}
	}
	if p.MustFail == nil {
		p.MustFail = []string{"/info CgroupVersion", "/info CgroupDriver"}
	}
	// An explicit empty list would leave nothing to reject or to require.
	if len(p.Reject) == 0 {
		return p, errors.New("params.reject: want at least one profile, got an empty list")
	}
	if len(p.MustFail) == 0 {
		return p, errors.New("params.mustFail: want at least one check name, got an empty list")
	}
	for i, name := range p.MustFail {
		if strings.TrimSpace(name) == "" {
			return p, fmt.Errorf("params.mustFail[%d]: want a check name, got %q", i, name)
		}
	}
	for i, name := range p.Reject {
		if !slices.Contains(profiles.Names(), name) {
			return p, fmt.Errorf("params.reject[%d]: unknown profile %q: allowed %s", i, name, strings.Join(profiles.Names(), ", "))
		}
	}
	return p, nil
}

// Validate checks params: reject (profile names) and mustFail (check names).
func (a Admission) Validate(params map[string]any) error {
	_, err := a.params(params)
	return err
}

// Run admits the manifest profile and each rejected profile, in steps:
// the requests, the manifest profile's admission with its rows
// cross-checked against the Engine (admitOwn), then each profile that must
// be rejected (rejectProfile).
func (a Admission) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	p, err := a.params(params)
	if err != nil {
		return err
	}
	rec.Request("admit", env.Profile)
	rec.Request("reject", p.Reject)
	rec.Request("mustFail", p.MustFail)
	if p.AsController {
		rec.Request("asController", true)
	}
	if err := admitOwn(ctx, env, rec); err != nil {
		return err
	}
	rejections := map[string]any{}
	for _, name := range p.Reject {
		r, err := rejectProfile(ctx, env, rec, p, name)
		if err != nil {
			return err
		}
		rejections[name] = r
	}
	rec.Observe("rejections", rejections)
	return nil
}

// admitOwn admits the manifest profile, checks each admission row and
// that it was admitted, then cross-checks the admission against facts the
// scenario reads from the Engine itself.
func admitOwn(ctx context.Context, env *Env, rec *Record) error {
	adm, err := admit(ctx, env, env.Profile)
	var admErr *driver.AdmissionError
	if err != nil && !errors.As(err, &admErr) {
		return fmt.Errorf("admit %s: %w", env.Profile, err)
	}
	rec.Observe("admission", adm)
	for _, c := range adm.Checks {
		rec.Check(env.Profile+": "+c.Name, c.Want, c.Got, c.OK)
	}
	rec.Check(env.Profile+": admitted", "no AdmissionError", errText(err), err == nil)
	if adm == nil {
		return nil
	}
	prof, perr := profiles.Load(env.Profile)
	if perr != nil {
		return perr
	}
	ind, ierr := readIndependent(ctx, env)
	if ierr != nil {
		return ierr
	}
	rec.Observe("independent engine facts", ind)
	for _, c := range crossCheck(adm, ind, prof, env.ImageID) {
		rec.Check(c.Name, c.Want, c.Got, c.OK)
	}
	return nil
}

// rejectProfile admits profile name (as its own controller platform with
// p.AsController) and checks it is rejected with an AdmissionError that
// lists every failed row, among them each of p.MustFail. It returns the
// rejection's evidence.
func rejectProfile(ctx context.Context, env *Env, rec *Record, p AdmissionParams, name string) (map[string]any, error) {
	var as *profiles.Platform
	if p.AsController {
		prof, err := profiles.Load(name)
		if err != nil {
			return nil, err
		}
		as = &prof.Controller
	}
	adm, err := admitAs(ctx, env, name, as)
	var admErr *driver.AdmissionError
	if err != nil && !errors.As(err, &admErr) {
		return nil, fmt.Errorf("admit %s: %w", name, err)
	}
	var failed []string
	if adm != nil {
		for _, c := range adm.Failed() {
			failed = append(failed, c.Name)
		}
	}
	sort.Strings(failed)
	r := map[string]any{"admission": adm, "failed": failed, "error": errText(err)}
	rec.Check(name+": rejected", "*driver.AdmissionError", errText(err), admErr != nil)
	if admErr != nil {
		var listed []string
		for _, c := range admErr.Failed {
			listed = append(listed, c.Name)
		}
		sort.Strings(listed)
		rec.Equal(name+": AdmissionError lists every failed check", failed, listed)
	}
	rec.Check(name+": failed checks non-empty", "at least one", failed, len(failed) > 0)
	for _, want := range p.MustFail {
		rec.Check(name+": failed checks include "+want, want, failed, slices.Contains(failed, want))
	}
	return r, nil
}

// admit runs Backend.Admit for profile with env's image and user.
func admit(ctx context.Context, env *Env, profile string) (*driver.Admission, error) {
	return admitAs(ctx, env, profile, nil)
}

// admitAs is admit as the controller platform as (Backend.AdmitAs), or as
// this process when as is nil.
func admitAs(ctx context.Context, env *Env, profile string, as *profiles.Platform) (*driver.Admission, error) {
	b, err := env.Backend(profile)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if as != nil {
		return b.AdmitAs(ctx, *as)
	}
	return b.Admit(ctx)
}

func errText(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// independentFacts are the admission facts the scenario reads itself
// through env.Engine (/info, /version, image inspect), to grade the
// driver's report against the Engine rather than against itself.
type independentFacts struct {
	Engine driver.EngineFacts `json:"engine"`
	Image  driver.ImageFacts  `json:"image"`
}

// readIndependent reads /info, /version and the exact guest image through
// env.Engine (read-only).
func readIndependent(ctx context.Context, env *Env) (independentFacts, error) {
	var f independentFacts
	if env.Engine == nil {
		return f, errors.New("admission: no Engine client for the independent cross-check")
	}
	ver, err := env.Engine.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return f, fmt.Errorf("admission: independent /version: %w", err)
	}
	info, err := env.Engine.Info(ctx, client.InfoOptions{})
	if err != nil {
		return f, fmt.Errorf("admission: independent /info: %w", err)
	}
	img, err := env.Engine.ImageInspect(ctx, env.ImageID)
	if err != nil {
		return f, fmt.Errorf("admission: independent image inspect %s: %w", env.ImageID, err)
	}
	f.Engine = driver.EngineFacts{
		DaemonID: info.Info.ID, APIVersion: ver.APIVersion, MinAPIVersion: ver.MinAPIVersion, Os: ver.Os, Arch: ver.Arch,
		CgroupVersion: info.Info.CgroupVersion, CgroupDriver: info.Info.CgroupDriver, SecurityOptions: info.Info.SecurityOptions,
	}
	f.Image = driver.ImageFacts{ID: img.ID, Os: img.Os, Architecture: img.Architecture}
	return f, nil
}

// crossCheck compares the driver-reported admission facts with the
// independently read ones ("cross-check: ..." checks: any difference is a
// failed check) and the independent facts with prof's expectations
// ("independent: ..." checks).
func crossCheck(adm *driver.Admission, ind independentFacts, prof profiles.Profile, imageID string) []evidence.Check {
	var out []evidence.Check
	add := func(name string, want, got any, ok bool) {
		out = append(out, evidence.Check{Name: name, Want: Render(want), Got: Render(got), OK: ok})
	}
	same := func(fact string, drv, own any) {
		d, o := Render(drv), Render(own)
		add("cross-check: "+fact+" (driver == independent)", o, d, d == o)
	}
	de, ie := adm.Engine, ind.Engine
	same("daemon ID", de.DaemonID, ie.DaemonID)
	same("/info CgroupVersion", de.CgroupVersion, ie.CgroupVersion)
	same("/info CgroupDriver", de.CgroupDriver, ie.CgroupDriver)
	same("/version ApiVersion", de.APIVersion, ie.APIVersion)
	same("/version MinAPIVersion", de.MinAPIVersion, ie.MinAPIVersion)
	same("/version Os", de.Os, ie.Os)
	same("/version Arch", de.Arch, ie.Arch)
	same("/info SecurityOptions", de.SecurityOptions, ie.SecurityOptions)
	same("image Id", adm.Image.ID, ind.Image.ID)
	same("image Os", adm.Image.Os, ind.Image.Os)
	same("image Architecture", adm.Image.Architecture, ind.Image.Architecture)

	add("independent: daemon ID", "non-empty", ie.DaemonID, strings.TrimSpace(ie.DaemonID) != "")
	add("independent: /info CgroupVersion", strconv.Itoa(prof.Cgroup.Version), ie.CgroupVersion, ie.CgroupVersion == strconv.Itoa(prof.Cgroup.Version))
	add("independent: /info CgroupDriver", prof.Cgroup.Driver, ie.CgroupDriver, ie.CgroupDriver == prof.Cgroup.Driver)
	api, apiOK := apiMinor(ie.APIVersion)
	floor, floorOK := apiMinor(ie.MinAPIVersion)
	want, _ := apiMinor(prof.Daemon.MinAPIVersion)
	add("independent: API version range", "MinAPIVersion <= "+prof.Daemon.MinAPIVersion+" <= ApiVersion", ie.MinAPIVersion+".."+ie.APIVersion,
		apiOK && floorOK && floor <= want && api >= want)
	add("independent: /version Os/Arch", "linux/"+prof.Daemon.Architecture, ie.Os+"/"+ie.Arch, ie.Os == "linux" && ie.Arch == prof.Daemon.Architecture)
	hasAppArmor := slices.ContainsFunc(ie.SecurityOptions, func(o string) bool { return hasOptionName(o, "apparmor") })
	add("independent: SecurityOptions AppArmor", prof.AppArmor.Daemon, ie.SecurityOptions, hasAppArmor == (prof.AppArmor.Daemon == profiles.AppArmorEnabled))
	seccomp := false
	for _, o := range prof.Seccomp.SecurityOptions {
		seccomp = seccomp || slices.Contains(ie.SecurityOptions, o)
	}
	add("independent: SecurityOptions seccomp", "one of "+strings.Join(prof.Seccomp.SecurityOptions, " | "), ie.SecurityOptions, seccomp)
	add("independent: image Id", imageID, ind.Image.ID, ind.Image.ID == imageID)
	add("independent: image Os/Architecture", "linux/"+prof.Image.Architecture, ind.Image.Os+"/"+ind.Image.Architecture,
		ind.Image.Os == "linux" && ind.Image.Architecture == prof.Image.Architecture)
	return out
}

// hasOptionName reports whether the /info SecurityOptions entry opt, a
// comma-separated list of key=value pairs, has name=<name>: Engines report
// AppArmor as "name=apparmor" or "name=apparmor,profile=default".
func hasOptionName(opt, name string) bool {
	for kv := range strings.SplitSeq(opt, ",") {
		if kv == "name="+name {
			return true
		}
	}
	return false
}

// apiMinor parses "1.<minor>" into its minor number.
func apiMinor(v string) (int, bool) {
	major, minor, ok := strings.Cut(v, ".")
	if !ok || major != "1" {
		return 0, false
	}
	n, err := strconv.Atoi(minor)
	return n, err == nil
}
