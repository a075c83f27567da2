package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/profiles"
)

// Admission qualifies driver admission (seed policy/preflight.js): the
// manifest profile must be admitted with every check passing, and each
// profile in params.reject must be rejected by this Engine with an
// *driver.AdmissionError whose failed checks include params.mustFail.
type Admission struct{}

// AdmissionParams are the admission scenario's manifest params.
type AdmissionParams struct {
	// Reject lists profiles this Engine must reject; default ["linux-x64"]
	// (the seed's cgroup v2/systemd/AppArmor profile).
	Reject []string `json:"reject,omitempty"`
	// MustFail lists check names every rejection must include; default
	// ["/info CgroupVersion", "/info CgroupDriver"].
	MustFail []string `json:"mustFail,omitempty"`
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

// Run admits the manifest profile and each rejected profile.
func (a Admission) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	p, err := a.params(params)
	if err != nil {
		return err
	}
	rec.Request("admit", env.Profile)
	rec.Request("reject", p.Reject)
	rec.Request("mustFail", p.MustFail)

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

	rejections := map[string]any{}
	for _, name := range p.Reject {
		adm, err := admit(ctx, env, name)
		var admErr *driver.AdmissionError
		if err != nil && !errors.As(err, &admErr) {
			return fmt.Errorf("admit %s: %w", name, err)
		}
		var failed []string
		if adm != nil {
			for _, c := range adm.Failed() {
				failed = append(failed, c.Name)
			}
		}
		sort.Strings(failed)
		rejections[name] = map[string]any{"admission": adm, "failed": failed, "error": errText(err)}
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
	}
	rec.Observe("rejections", rejections)
	return nil
}

// admit runs Backend.Admit for profile with env's image and user.
func admit(ctx context.Context, env *Env, profile string) (*driver.Admission, error) {
	b, err := env.Backend(profile)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	return b.Admit(ctx)
}

func errText(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
