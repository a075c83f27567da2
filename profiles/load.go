package profiles

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

//go:embed profiles/*.yaml
var documents embed.FS

const dir = "profiles"

// UnknownProfileError reports a profile name with no embedded document.
type UnknownProfileError struct {
	// Name is the requested profile name.
	Name string
	// Known lists the embedded profile names, sorted.
	Known []string
}

var _ error = (*UnknownProfileError)(nil)

func (e *UnknownProfileError) Error() string {
	return fmt.Sprintf("profiles: unknown profile %q (known: %s)", e.Name, strings.Join(e.Known, ", "))
}

// Names returns the names of the embedded profiles, sorted.
func Names() []string {
	entries, err := fs.ReadDir(documents, dir)
	if err != nil {
		panic(fmt.Sprintf("profiles: embedded directory: %v", err)) // The embed pattern guarantees it.
	}
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && !e.IsDir() {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Load decodes and validates the embedded profile name, for example
// "linux-x64". It returns *UnknownProfileError when no such profile is
// embedded and *InvalidProfileError when its document is malformed.
func Load(name string) (Profile, error) {
	if !slices.Contains(Names(), name) {
		return Profile{}, &UnknownProfileError{Name: name, Known: Names()}
	}
	data, err := documents.ReadFile(path.Join(dir, name+".yaml"))
	if err != nil {
		return Profile{}, fmt.Errorf("profiles: %w", err)
	}
	return parse(name, data)
}

// All loads every embedded profile in Names order. It returns the first
// *InvalidProfileError, or an error when two profiles share a
// BackendRevision.
func All() ([]Profile, error) {
	var all []Profile
	owner := map[string]string{}
	for _, name := range Names() {
		p, err := Load(name)
		if err != nil {
			return nil, err
		}
		if other, dup := owner[p.BackendRevision]; dup {
			return nil, &InvalidProfileError{File: name + ".yaml", Issues: []Issue{{
				Field:   "backendRevision",
				Problem: fmt.Sprintf("%q is also the revision of %s.yaml", p.BackendRevision, other),
			}}}
		}
		owner[p.BackendRevision] = name
		all = append(all, p)
	}
	return all, nil
}

// DaemonAPIVersionFor returns the newest daemon.minAPIVersion of the
// embedded profiles ("1.<minor>") that is at most served, the newest API
// version an Engine reports (its /_ping API-Version): the version a harness
// client pins when no one profile is in play (`qualify image`, `observe
// --container`), so that it speaks a version some profile was qualified
// through and never negotiates to an arbitrary one. It returns "" when
// served is not 1.<minor> or older than every profile's. It panics on an
// embedded profile that does not load, which the package's tests rule out.
func DaemonAPIVersionFor(served string) string {
	all, err := All()
	if err != nil {
		panic(fmt.Sprintf("profiles: embedded profiles: %v", err)) // TestAllEmbeddedProfilesLoad rules it out.
	}
	m := apiVersionPattern.FindStringSubmatch(served)
	if m == nil {
		return ""
	}
	limit, _ := strconv.Atoi(m[1])
	best, bestMinor := "", -1
	for _, p := range all {
		// Validation guarantees 1.<minor> with minor in range.
		pm := apiVersionPattern.FindStringSubmatch(p.Daemon.MinAPIVersion)
		minor, _ := strconv.Atoi(pm[1])
		if minor <= limit && minor > bestMinor {
			best, bestMinor = p.Daemon.MinAPIVersion, minor
		}
	}
	return best
}
