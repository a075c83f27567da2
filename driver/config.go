package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/sandboxapi"
)

// User is the workload's numeric identity. Both IDs are in 1..262143, the
// range tar ownership fields carry portably (docs/contract.md#workspace-files).
type User struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// MaxArchiveID is the highest UID or GID the backend admits.
const MaxArchiveID = 262143

// Dataset is a borrowed read-only image attached at /datasets/<Name>
// (docs/contract.md#datasets).
type Dataset struct {
	// Name is unique and matches ^[a-z][a-z0-9-]{0,62}$.
	Name string `json:"name"`
	// ImageID is the exact local image ID, "sha256:<64 hex>".
	ImageID string `json:"imageDigest"`
	// Subpath is an optional canonical relative path of a directory or
	// regular file inside the image, mounted instead of the image root; nil
	// mounts the root. A non-nil empty subpath is an error, not "absent".
	// One the Engine cannot mount inside the image fails Start with
	// *DatasetSubpathError (docs/contract.md#datasets).
	Subpath *string `json:"subpath,omitempty"`
}

// MaxDatasets bounds dataset attachments (docs/contract.md#datasets).
const MaxDatasets = 32

// Config selects the Engine, profile, image and identity of a Backend.
type Config struct {
	// Profile is the explicit platform profile name (profiles.Names()).
	Profile string
	// Endpoint is the Engine's Unix socket, "unix:///abs/path" or "/abs/path".
	Endpoint string
	// Namespace separates this application's sandboxes (sandboxapi.Namespace).
	Namespace string
	// SpillDirectory is a canonical absolute directory owned by the caller,
	// used for transfer metadata spill files.
	SpillDirectory string
	// ImageID is the exact local workload image ID, "sha256:<64 hex>".
	ImageID string
	// User is the workload's non-root identity.
	User User
	// Datasets are optional borrowed read-only images.
	Datasets []Dataset
}

var (
	imageIDPattern     = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	datasetNamePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
)

// configIssues collects every problem of one Config; its paths are Config
// field paths ("ImageID", "Datasets[1].Name").
type configIssues struct{ issues []sandboxapi.Issue }

func (c *configIssues) add(message string, path ...string) {
	c.issues = append(c.issues, sandboxapi.Issue{Path: path, Message: message})
}

func (c *configIssues) err() error {
	if len(c.issues) == 0 {
		return nil
	}
	return &sandboxapi.ValidationError{Issues: c.issues}
}

// validate checks every field without touching the Engine or the spill
// directory's contents (construction is inert) and resolves the profile. It
// reports every problem at once: a *sandboxapi.ValidationError with one
// Issue per invalid field, as policy parsing does
// (docs/contract.md#errors).
func (c *Config) validate() (profiles.Profile, sandboxapi.Namespace, string, error) {
	var bad configIssues
	prof, err := profiles.Load(c.Profile)
	if err != nil {
		bad.add(err.Error(), "Profile")
	}
	socket, err := socketPath(c.Endpoint)
	if err != nil {
		bad.add(err.Error(), "Endpoint")
	}
	ns, err := sandboxapi.ParseNamespace(c.Namespace)
	if err != nil {
		bad.add(err.Error(), "Namespace")
	}
	if !filepath.IsAbs(c.SpillDirectory) || filepath.Clean(c.SpillDirectory) != c.SpillDirectory {
		bad.add(fmt.Sprintf("%q must be a canonical absolute path", c.SpillDirectory), "SpillDirectory")
	}
	if !imageIDPattern.MatchString(c.ImageID) {
		bad.add(fmt.Sprintf("%q must be an exact image ID sha256:<64 lowercase hex>", c.ImageID), "ImageID")
	}
	if c.User.UID < 1 || c.User.UID > MaxArchiveID {
		bad.add(fmt.Sprintf("%d must be in 1..%d", c.User.UID, MaxArchiveID), "User", "UID")
	}
	if c.User.GID < 1 || c.User.GID > MaxArchiveID {
		bad.add(fmt.Sprintf("%d must be in 1..%d", c.User.GID, MaxArchiveID), "User", "GID")
	}
	if len(c.Datasets) > MaxDatasets {
		bad.add(fmt.Sprintf("%d attachments exceed the maximum of %d", len(c.Datasets), MaxDatasets), "Datasets")
	}
	seen := map[string]bool{}
	for i, d := range c.Datasets {
		field := fmt.Sprintf("Datasets[%d]", i)
		if !datasetNamePattern.MatchString(d.Name) {
			bad.add(fmt.Sprintf("%q must match %s", d.Name, datasetNamePattern), field, "Name")
		} else if seen[d.Name] {
			bad.add(fmt.Sprintf("%q is not unique", d.Name), field, "Name")
		}
		seen[d.Name] = true
		if !imageIDPattern.MatchString(d.ImageID) {
			bad.add(fmt.Sprintf("%q must be an exact image ID", d.ImageID), field, "ImageID")
		}
		if d.Subpath != nil {
			if err := parseSubpath(*d.Subpath); err != nil {
				bad.add(err.Error(), field, "Subpath")
			}
		}
	}
	if err := bad.err(); err != nil {
		return profiles.Profile{}, "", "", err
	}
	return prof, ns, socket, nil
}

// checkSpillDirectory verifies the caller-owned spill directory at startup:
// it exists, is a directory, is canonical (no symlink on the way), is owned
// by this process's user and writable by no one else.
func checkSpillDirectory(dir string) error {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return &sandboxapi.UnsupportedError{Message: "spill directory " + dir + " is not usable", Err: err}
	}
	if resolved != dir {
		return &sandboxapi.UnsupportedError{Message: fmt.Sprintf("spill directory %s resolves to %s; give its canonical path", dir, resolved)}
	}
	st, err := os.Stat(dir)
	if err != nil {
		return &sandboxapi.UnsupportedError{Message: "spill directory " + dir + " is not usable", Err: err}
	}
	if !st.IsDir() {
		return &sandboxapi.UnsupportedError{Message: "spill directory " + dir + " is not a directory"}
	}
	if st.Mode().Perm()&0o022 != 0 {
		return &sandboxapi.UnsupportedError{Message: fmt.Sprintf("spill directory %s is writable by group or others (mode %v); transfer metadata there must be the caller's alone", dir, st.Mode().Perm())}
	}
	if uid, ok := fileOwner(st); ok && uid != uint32(os.Geteuid()) {
		return &sandboxapi.UnsupportedError{Message: fmt.Sprintf("spill directory %s is owned by uid %d, not by this controller (uid %d)", dir, uid, os.Geteuid())}
	}
	return nil
}
