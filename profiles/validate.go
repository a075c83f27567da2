package profiles

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

var (
	namePattern       = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	apiVersionPattern = regexp.MustCompile(`^1\.(0|[1-9][0-9]*)$`)
	semverPattern     = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)
	// moduleVersionPattern is a Go module version: "v" and semver, with an
	// optional pre-release ("v2.0.0-beta.24") but no build metadata, which
	// Go reports for unstamped builds ("v2.0.0+unknown") and which names no
	// release.
	moduleVersionPattern = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)
	modulePathPattern    = regexp.MustCompile(`^[a-z0-9.-]+(/[A-Za-z0-9._~-]+)+$`)
	// runtimePattern is an OCI runtime name as dockerd's runtimes
	// configuration takes one ("runc", "io.containerd.runc.v2", "runsc").
	runtimePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// Bounds that are facts of the Engine API, not of a profile.
const (
	// oldestAPIMinor is github.com/moby/moby/client's MinAPIVersion, 1.40.
	oldestAPIMinor = 40
	// imageMountAPIMinor is the first API with `type: image` mounts, 1.48.
	imageMountAPIMinor = 48
)

// validate checks that every field of p is set and within range and that
// p.Name equals name, the file name without ".yaml": section by section,
// in the file's order, each adding its issues to is.
func validate(name string, p Profile, is *issues) {
	validateIdentity(name, p, is)
	oneOf(is, "controller.os", p.Controller.OS, "linux", "darwin")
	oneOf(is, "controller.architecture", p.Controller.Architecture, "amd64", "arm64")
	validateDaemon(p.Daemon, is)
	oneOf(is, "image.architecture", p.Image.Architecture, "amd64", "arm64")
	if !runtimePattern.MatchString(p.Runtime) {
		is.add("runtime", "%q is not an OCI runtime name (letters, digits, '_', '.', '-'; at most 64)", p.Runtime)
	}
	validateCgroup(p.Cgroup, is)
	validateAppArmor(p.AppArmor, is)
	validateSeccomp(p.Seccomp, is)
	validateDatasets(p.Datasets, is)
	oneOf(is, "qualification.status", p.Qualification.Status, StatusPending, StatusQualified)
	nonEmpty(is, "qualification.note", p.Qualification.Note)
}

// validateIdentity checks the name (the file's, lowercase words joined by
// '-') and the backend revision derived from it.
func validateIdentity(name string, p Profile, is *issues) {
	if p.Name != name {
		is.add("name", "%q differs from the file name %q", p.Name, name+".yaml")
	} else if !namePattern.MatchString(p.Name) {
		is.add("name", "%q is not lowercase words joined by '-'", p.Name)
	}
	wantRevision := fmt.Sprintf("engine-%s-v", p.Daemon.MinAPIVersion)
	if rest, ok := strings.CutPrefix(p.BackendRevision, wantRevision); !ok ||
		!validRevisionTail(rest, p.Name) {
		is.add("backendRevision", "%q is not %s<N>-%s", p.BackendRevision, wantRevision, p.Name)
	}
}

// validateDaemon checks the daemon section.
func validateDaemon(d Daemon, is *issues) {
	oneOf(is, "daemon.architecture", d.Architecture, "amd64", "arm64")
	nonEmptyUnique(is, "daemon.infoArchitectures", d.InfoArchitectures)
	if !slices.Contains(d.InfoArchitectures, d.Architecture) {
		is.add("daemon.infoArchitectures", "%q does not include daemon.architecture %q", d.InfoArchitectures, d.Architecture)
	}
	apiVersion(is, "daemon.minAPIVersion", d.MinAPIVersion, oldestAPIMinor)
	switch {
	case d.Desktop && d.OperatingSystem != DesktopOperatingSystem:
		is.add("daemon.operatingSystem", "%q, want %q for a desktop daemon", d.OperatingSystem, DesktopOperatingSystem)
	case !d.Desktop && d.OperatingSystem != "":
		is.add("daemon.operatingSystem", "%q set for a non-desktop daemon, want it absent", d.OperatingSystem)
	}
}

// validateCgroup checks the cgroup section.
func validateCgroup(c Cgroup, is *issues) {
	if c.Version != 1 && c.Version != 2 {
		is.add("cgroup.version", "%d, want 1 or 2", c.Version)
	}
	oneOf(is, "cgroup.driver", c.Driver, "systemd", "cgroupfs")
	if c.Version == 1 && c.Namespace.SecurityOption {
		is.add("cgroup.namespace.securityOption", "true, but cgroup v1 daemons never report name=cgroupns")
	}
	if !c.Namespace.PerContainerReadback {
		is.add("cgroup.namespace.perContainerReadback", "false, but every profile requires a private cgroup namespace")
	}
}

// validateAppArmor checks the appArmor section.
func validateAppArmor(a AppArmor, is *issues) {
	oneOf(is, "appArmor.daemon", a.Daemon, AppArmorEnabled, AppArmorAbsent)
	switch {
	case a.Daemon == AppArmorEnabled && a.WorkloadProfile == "":
		is.add("appArmor.workloadProfile", "empty, want the running workload's profile when the daemon has AppArmor")
	case a.Daemon == AppArmorAbsent && a.WorkloadProfile != "":
		is.add("appArmor.workloadProfile", "%q, want \"\" when the daemon has no AppArmor", a.WorkloadProfile)
	}
}

// validateSeccomp checks the seccomp section.
func validateSeccomp(s Seccomp, is *issues) {
	nonEmptyUnique(is, "seccomp.securityOptions", s.SecurityOptions)
	for i, o := range s.SecurityOptions {
		if rest, ok := strings.CutPrefix(o, "name=seccomp,profile="); !ok || rest == "" || strings.Contains(rest, ",") {
			is.add(fmt.Sprintf("seccomp.securityOptions[%d]", i), "%q is not name=seccomp,profile=<name>", o)
		}
	}
}

// validateDatasets checks the datasets section.
func validateDatasets(ds DatasetRequirements, is *issues) {
	if !semverPattern.MatchString(ds.MinEngineVersion) {
		is.add("datasets.minEngineVersion", "%q is not <major>.<minor>.<patch>", ds.MinEngineVersion)
	}
	apiVersion(is, "datasets.minAPIVersion", ds.MinAPIVersion, imageMountAPIMinor)
	nonEmpty(is, "datasets.storageDriver", ds.StorageDriver)
	nonEmpty(is, "datasets.driverType", ds.DriverType)
	seen := map[ModuleBuild]bool{}
	for i, mb := range ds.ModuleBuilds {
		field := fmt.Sprintf("datasets.moduleBuilds[%d]", i)
		if !modulePathPattern.MatchString(mb.Module) {
			is.add(field+".module", "%q is not a Go module path", mb.Module)
		}
		if !moduleVersionPattern.MatchString(mb.Version) {
			is.add(field+".version", "%q is not an exact Go module version v<major>.<minor>.<patch>[-<pre-release>]", mb.Version)
		}
		if seen[mb] {
			is.add(field, "%s@%s is listed twice", mb.Module, mb.Version)
		}
		seen[mb] = true
	}
}

func validRevisionTail(rest, name string) bool {
	n, tail, ok := strings.Cut(rest, "-")
	if !ok || tail != name {
		return false
	}
	v, err := strconv.Atoi(n)
	return err == nil && v > 0 && strconv.Itoa(v) == n
}

func oneOf(is *issues, field, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		is.add(field, "%q, want one of %q", v, allowed)
	}
}

func nonEmpty(is *issues, field, v string) {
	if strings.TrimSpace(v) == "" {
		is.add(field, "empty")
	}
}

func nonEmptyUnique(is *issues, field string, vs []string) {
	seen := map[string]bool{}
	for i, v := range vs {
		f := fmt.Sprintf("%s[%d]", field, i)
		nonEmpty(is, f, v)
		if seen[v] {
			is.add(f, "duplicate %q", v)
		}
		seen[v] = true
	}
}

// apiVersion checks v is "1.<minor>" with minor at least minMinor.
func apiVersion(is *issues, field, v string, minMinor int) {
	m := apiVersionPattern.FindStringSubmatch(v)
	if m == nil {
		is.add(field, "%q is not 1.<minor>", v)
		return
	}
	if minor, _ := strconv.Atoi(m[1]); minor < minMinor || minor > 999 {
		is.add(field, "%q is out of range 1.%d to 1.999", v, minMinor)
	}
}
