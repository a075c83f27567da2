package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/sandboxapi"
)

// Scenario is one qualification scenario.
type Scenario interface {
	// Name is the manifest name, e.g. "isolation".
	Name() string
	// Validate checks the manifest params strictly: unknown keys and
	// wrong types are errors naming the key.
	Validate(params map[string]any) error
	// Run executes the scenario. It records checks and facts in rec and
	// returns the scenario's own failure (nil when it ran to completion,
	// even if checks failed). Run must release everything it creates, with
	// cleanup detached from ctx's cancellation, and report cleanup
	// failures through rec.CleanupError.
	Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error
}

// Exclusive is implemented by a scenario that must not run beside others
// under qualify's --parallel: Exclusive returns what it shares with them
// (a timing bound, a host-wide resource), or "" when it shares nothing.
type Exclusive interface {
	Exclusive() string
}

// Registry maps scenario names to scenarios.
type Registry map[string]Scenario

// Default returns the registry of every real scenario. Each one ends with
// CheckNamespaceLeftovers: a read-only list of Engine objects still
// labelled with its namespace.
func Default() Registry {
	r := NewRegistry(Admission{}, Isolation{}, Lifecycle{}, MemoryExhaustion{}, PIDExhaustion{}, TmpfsBounds{},
		StreamLimits{}, Cancellation{}, DescendantContainment{}, NetworkIsolation{}, ExactCleanup{}, UnsupportedQuota{}, LostEngineReplies{},
		Transfer{}, ControllerDeath{}, Datasets{}, DesktopAdmission{}, WarmPool{}, EngineRestart{})
	for name, s := range r {
		r[name] = WithLeftoverCheck(s)
	}
	return r
}

// WithLeftoverCheck returns s followed by CheckNamespaceLeftovers, as every
// scenario of Default is; tests use it to register a variant of a
// scenario.
func WithLeftoverCheck(s Scenario) Scenario { return leftoverChecked{s} }

// NewRegistry returns a registry of scenarios keyed by name.
func NewRegistry(scenarios ...Scenario) Registry {
	r := Registry{}
	for _, s := range scenarios {
		r[s.Name()] = s
	}
	return r
}

// Names returns the registered names, sorted.
func (r Registry) Names() []string {
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Validate checks that name is registered and its params are valid.
func (r Registry) Validate(name string, params map[string]any) error {
	s, ok := r[name]
	if !ok {
		return fmt.Errorf("unknown scenario %q: allowed %s", name, strings.Join(r.Names(), ", "))
	}
	return s.Validate(params)
}

// Env is what a scenario runs against. The runner fills it per scenario.
type Env struct {
	// Profile is the manifest's platform profile.
	Profile string
	// Endpoint is the Engine socket, "unix:///abs/path".
	Endpoint string
	// ImageID is the exact guest image ID.
	ImageID string
	// User is the workload identity.
	User driver.User
	// Namespace is this scenario's own sandbox namespace.
	Namespace string
	// Policy is the manifest's normalized policy.
	Policy sandboxapi.Policy
	// Dir is the scenario's own canonical absolute output directory.
	Dir string
	// Engine is a client of the same Engine, used only for read-only
	// inspection and lists (absence and leftover checks, admission's
	// cross-check); scenarios never mutate through it.
	Engine *client.Client
	// Logf prints a progress detail line (stderr); it may be nil.
	Logf func(format string, args ...any)
	// Host is the host filesystem rooted at "/" that the cgroup observer
	// reads (/proc, /sys/fs/cgroup); nil means os.DirFS("/").
	Host fs.FS
}

// HostFS returns Host or os.DirFS("/").
func (e *Env) HostFS() fs.FS {
	if e.Host == nil {
		return os.DirFS("/")
	}
	return e.Host
}

// Log prints a progress detail line when Logf is set.
func (e *Env) Log(format string, args ...any) {
	if e.Logf != nil {
		e.Logf(format, args...)
	}
}

// Backend returns a driver backend for profile with this scenario's
// namespace, image and user; its spill directory is <Dir>/spill. The
// caller closes it.
func (e *Env) Backend(profile string) (*driver.Backend, error) {
	spill := filepath.Join(e.Dir, "spill")
	if err := os.MkdirAll(spill, 0o700); err != nil {
		return nil, err
	}
	return driver.New(driver.Config{
		Profile: profile, Endpoint: e.Endpoint, Namespace: e.Namespace,
		SpillDirectory: spill, ImageID: e.ImageID, User: e.User,
	})
}

// Request returns the manifest policy as a sandbox request.
func (e *Env) Request() sandboxapi.Request { return sandboxapi.Request{Policy: e.Policy} }

// Record collects a scenario's evidence. It is safe for concurrent use.
type Record struct {
	mu        sync.Mutex
	requested map[string]any
	observed  map[string]any
	checks    []evidence.Check
	cleanup   []string
	owners    []sandboxapi.CleanupOwner
	verdict   *evidence.Verdict
}

// NewRecord returns an empty record.
func NewRecord() *Record {
	return &Record{requested: map[string]any{}, observed: map[string]any{}}
}

// Request records a requested fact under key.
func (r *Record) Request(key string, v any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requested[key] = v
}

// Observe records an observed fact under key.
func (r *Record) Observe(key string, v any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observed[key] = v
}

// Check records a check; want and got are rendered with Render. It returns ok.
func (r *Record) Check(name string, want, got any, ok bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks = append(r.checks, evidence.Check{Name: name, Want: Render(want), Got: Render(got), OK: ok})
	return ok
}

// Equal records a check that got equals want (compared by rendering).
func (r *Record) Equal(name string, want, got any) bool {
	w, g := Render(want), Render(got)
	return r.Check(name, w, g, w == g)
}

// CleanupError records a failure that happened during cleanup, kept apart
// from the scenario's own failure.
func (r *Record) CleanupError(what string, err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanup = append(r.cleanup, what+": "+err.Error())
}

// Track registers a cleanup owner (reservation or sandbox) whose recovery
// record lists resources the scenario created. The runner reads the latest
// record after Run and checks every resource's absence by exact ID.
func (r *Record) Track(owner sandboxapi.CleanupOwner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owners = append(r.owners, owner)
}

// Skip sets the verdict to skipped with reason (unless a check failed).
func (r *Record) Skip(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.verdict = &evidence.Verdict{Kind: evidence.Skipped, Reason: reason}
}

// NotApplicable sets the verdict to not_applicable with reason.
func (r *Record) NotApplicable(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.verdict = &evidence.Verdict{Kind: evidence.NotApplicable, Reason: reason}
}

// Snapshot is a copy of a Record's contents.
type Snapshot struct {
	Requested     map[string]any
	Observed      map[string]any
	Checks        []evidence.Check
	CleanupErrors []string
	Owners        []sandboxapi.CleanupOwner
	// Verdict is the scenario's explicit skip or not-applicable, or nil.
	Verdict *evidence.Verdict
}

// Snapshot returns a copy of the record.
func (r *Record) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Snapshot{
		Requested: map[string]any{}, Observed: map[string]any{},
		Checks: slices.Clone(r.checks), CleanupErrors: slices.Clone(r.cleanup), Owners: slices.Clone(r.owners),
	}
	for k, v := range r.requested {
		s.Requested[k] = v
	}
	for k, v := range r.observed {
		s.Observed[k] = v
	}
	if r.verdict != nil {
		v := *r.verdict
		s.Verdict = &v
	}
	return s
}

// Render renders a check value: strings as they are, everything else as
// compact JSON.
func Render(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if s, ok := v.(fmt.Stringer); ok {
		return s.String()
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// DecodeParams decodes manifest params into out (a pointer to a struct
// with json tags) strictly: unknown keys and wrong types are errors that
// name the key. nil params decode as an empty object.
func DecodeParams(params map[string]any, out any) error {
	if params == nil {
		params = map[string]any{}
	}
	// encoding/json matches field names case-insensitively; params are
	// case-sensitive, so unknown keys are found here first.
	allowed := jsonFields(out)
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("params.%s: unknown parameter; allowed: %s", k, strings.Join(allowed, ", "))
		}
	}
	data, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("params: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		var te *json.UnmarshalTypeError
		if ok := asTypeError(err, &te); ok {
			return fmt.Errorf("params.%s: want %s, got %s", te.Field, te.Type, te.Value)
		}
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return fmt.Errorf("params.%s: unknown parameter; allowed: %s", strings.Trim(f, `"`), strings.Join(jsonFields(out), ", "))
		}
		return fmt.Errorf("params: %s", msg)
	}
	return nil
}
