package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/profiles/yamlbounds"
	"github.com/qualbox/qualbox/sandboxapi"
)

// ImageBuild is the image value that asks the run to build the guest image.
const ImageBuild = "build"

// DefaultUser is the workload identity when the manifest names none
// (nobody:nogroup).
var DefaultUser = driver.User{UID: 65534, GID: 65534}

// DefaultNamespace is the namespace prefix when the manifest names none.
const DefaultNamespace = "qualbox"

// MaxNamespacePrefixBytes bounds the namespace prefix so that
// "<prefix>-<scenario>-<8 hex>" fits sandboxapi.MaxNamespaceBytes for
// scenario names up to 22 bytes.
const MaxNamespacePrefixBytes = 32

// Manifest is a parsed, validated manifest.
type Manifest struct {
	// Path is the file it was read from, as given.
	Path string
	// SHA256 is the hex digest of the file's bytes.
	SHA256 string
	// Profile is the platform profile name.
	Profile string
	// Endpoint is the Engine socket, "unix:///abs/path".
	Endpoint string
	// Image is ImageBuild or an exact "sha256:<64 hex>" image ID.
	Image string
	// User is the workload identity (default DefaultUser).
	User driver.User
	// Namespace is the namespace prefix; each scenario gets its own
	// namespace derived from it.
	Namespace string
	// Output is the output directory; empty means the default
	// reports/runs/<UTC timestamp>.
	Output string
	// Policy is the normalized sandbox policy.
	Policy sandboxapi.Policy
	// Scenarios are the scenarios in run order.
	Scenarios []Entry
}

// Entry is one scenario of a manifest.
type Entry struct {
	Name   string         `json:"name"`
	Params map[string]any `json:"params"`
}

// Validator checks scenario names and parameters; scenario.Registry
// implements it.
type Validator interface {
	// Names lists the allowed scenario names.
	Names() []string
	// Validate checks params of the named (allowed) scenario.
	Validate(name string, params map[string]any) error
}

// Issue is one problem in a manifest.
type Issue struct {
	// Field is the dotted field path, e.g. "policy.resources.memoryBytes"
	// or "scenarios[1].name"; empty for the document as a whole.
	Field string
	// Line is the 1-based line of the field, 0 when unknown.
	Line int
	// Problem says what is wrong.
	Problem string
}

// Error reports an invalid manifest. Error() renders one
// "file:line: field: problem" clause per issue.
type Error struct {
	File   string
	Issues []Issue
	// Limit is set when the manifest exceeds a parser bound; Unwrap
	// returns it, so errors.As finds a *LimitError.
	Limit *LimitError
}

var _ error = (*Error)(nil)

// Unwrap returns the exceeded bound, or nil.
func (e *Error) Unwrap() error {
	if e.Limit == nil {
		return nil
	}
	return e.Limit
}

// Bounds on a manifest document (docs/untrusted-inputs.md). A manifest
// selects what runs against a real Engine and may come from a pull
// request, so the parser refuses documents beyond them before decoding
// values: go.yaml.in/yaml/v3 only bounds alias expansion by a ratio and
// nesting at 10,000 levels.
const (
	// MaxBytes bounds the manifest file, in bytes.
	MaxBytes = 1 << 20
	// MaxDepth bounds the nesting of mappings and sequences, aliases
	// counted where they are used.
	MaxDepth = 32
	// MaxNodes bounds the YAML nodes of the document with every alias
	// expanded where it is used (billion laughs stays small).
	MaxNodes = 100_000
	// MaxScalarBytes bounds one scalar (key or value), in bytes.
	MaxScalarBytes = 64 << 10
)

// LimitError reports a manifest beyond one of its bounds.
type LimitError struct {
	// Limit names the bound: "MaxBytes", "MaxDepth", "MaxNodes" or
	// "MaxScalarBytes".
	Limit string
	// Max is the bound (MaxBytes, MaxDepth, MaxNodes or MaxScalarBytes).
	Max int
	// Line is the 1-based line where the bound was crossed, 0 for MaxBytes.
	Line int
}

var _ error = (*LimitError)(nil)

func (e *LimitError) Error() string {
	return fmt.Sprintf("manifest exceeds %s (%d)", e.Limit, e.Max)
}

// checkBounds returns the first bound the document crosses, aliases
// expanded where they are used.
func checkBounds(root *yaml.Node) *LimitError {
	c := yamlbounds.Check(root, yamlbounds.Bounds{Depth: MaxDepth, Nodes: MaxNodes, ScalarBytes: MaxScalarBytes})
	if c == nil {
		return nil
	}
	return &LimitError{Limit: c.Limit, Max: c.Max, Line: c.Line}
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Issues))
	for i, is := range e.Issues {
		loc := e.File
		if is.Line > 0 {
			loc = fmt.Sprintf("%s:%d", e.File, is.Line)
		}
		if is.Field != "" {
			parts[i] = fmt.Sprintf("%s: %s: %s", loc, is.Field, is.Problem)
		} else {
			parts[i] = fmt.Sprintf("%s: %s", loc, is.Problem)
		}
	}
	return "manifest " + strings.Join(parts, "; ")
}

type issues []Issue

func (is *issues) add(field string, line int, format string, args ...any) {
	*is = append(*is, Issue{Field: field, Line: line, Problem: fmt.Sprintf(format, args...)})
}

// Load reads and parses the manifest file at path.
func Load(path string, v Validator) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Issues: []Issue{{Problem: err.Error()}}}
	}
	return Parse(path, data, v)
}

var imageIDPattern = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// topFields are the manifest's top-level keys, in documentation order.
var topFields = []string{"profile", "engine", "image", "user", "namespace", "output", "policy", "scenarios"}

// Parse parses manifest data read from file (used in messages only). It
// returns *Error listing every problem found; a manifest beyond MaxBytes,
// MaxDepth, MaxNodes or MaxScalarBytes is refused with an *Error that
// wraps a *LimitError, before any value is decoded. Duplicate keys are
// problems, never last-one-wins.
func Parse(file string, data []byte, v Validator) (*Manifest, error) {
	sum := sha256.Sum256(data)
	m := &Manifest{Path: file, SHA256: hex.EncodeToString(sum[:]), User: DefaultUser, Namespace: DefaultNamespace}
	var is issues
	top, err := parseTop(file, data, &is)
	if err != nil {
		return nil, err
	}
	// Then each top-level field, in documentation order, every problem
	// kept.
	m.parseProfile(top, &is)
	m.parseEngine(top, &is)
	m.parseImage(top, &is)
	m.parseUser(top, &is)
	m.parseNamespace(top, &is)
	m.Output = str(top, "output", "", &is, false)
	m.parsePolicy(top, &is)
	m.parseScenarios(top, v, &is)
	if len(is) > 0 {
		return nil, &Error{File: file, Issues: is}
	}
	return m, nil
}

// parseTop checks data's bounds and shape (one YAML mapping) and indexes
// its top-level fields. A bound crossed or a document that is not a
// mapping is an *Error, the only problem reported.
func parseTop(file string, data []byte, is *issues) (map[string]*yaml.Node, error) {
	limit := func(l *LimitError) error {
		return &Error{File: file, Issues: []Issue{{Line: l.Line, Problem: l.Error()}}, Limit: l}
	}
	if len(data) > MaxBytes {
		return nil, limit(&LimitError{Limit: "MaxBytes", Max: MaxBytes})
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		is.add("", 0, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		return nil, &Error{File: file, Issues: *is}
	}
	if l := checkBounds(&root); l != nil {
		return nil, limit(l)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		is.add("", 0, "want one YAML mapping with fields %s", strings.Join(topFields, ", "))
		return nil, &Error{File: file, Issues: *is}
	}
	return fields(root.Content[0], "", topFields, is), nil
}

// parseProfile reads profile: required, a known profile.
func (m *Manifest) parseProfile(top map[string]*yaml.Node, is *issues) {
	m.Profile = str(top, "profile", "", is, true)
	if m.Profile != "" && !slices.Contains(profiles.Names(), m.Profile) {
		is.add("profile", top["profile"].Line, "unknown profile %q: allowed %s", m.Profile, strings.Join(profiles.Names(), ", "))
	}
}

// parseEngine reads engine: required, a mapping whose endpoint is
// required and passes CheckEndpoint.
func (m *Manifest) parseEngine(top map[string]*yaml.Node, is *issues) {
	n, ok := top["engine"]
	if !ok {
		is.add("engine", 0, "required (engine.endpoint, e.g. unix:///var/run/docker.sock)")
		return
	}
	if n.Kind != yaml.MappingNode {
		is.add("engine", n.Line, "want a mapping with field endpoint")
		return
	}
	eng := fields(n, "engine", []string{"endpoint"}, is)
	m.Endpoint = str(eng, "endpoint", "engine.", is, true)
	if m.Endpoint != "" {
		if err := CheckEndpoint(m.Endpoint); err != nil {
			is.add("engine.endpoint", eng["endpoint"].Line, "%s", err)
		}
	}
}

// parseImage reads image: required, ImageBuild or an exact image ID.
func (m *Manifest) parseImage(top map[string]*yaml.Node, is *issues) {
	m.Image = str(top, "image", "", is, true)
	if m.Image != "" && m.Image != ImageBuild && !imageIDPattern.MatchString(m.Image) {
		is.add("image", top["image"].Line, "%q: want %q or an exact image ID sha256:<64 lowercase hex>", m.Image, ImageBuild)
	}
}

// parseUser reads user, when present: a mapping of uid and gid, each
// defaulting to DefaultUser's.
func (m *Manifest) parseUser(top map[string]*yaml.Node, is *issues) {
	n, ok := top["user"]
	if !ok {
		return
	}
	if n.Kind != yaml.MappingNode {
		is.add("user", n.Line, "want a mapping with fields uid, gid")
		return
	}
	u := fields(n, "user", []string{"uid", "gid"}, is)
	m.User.UID = id(u, "uid", is, m.User.UID)
	m.User.GID = id(u, "gid", is, m.User.GID)
}

// parseNamespace reads namespace, when present: an identity of at most
// MaxNamespacePrefixBytes.
func (m *Manifest) parseNamespace(top map[string]*yaml.Node, is *issues) {
	if _, ok := top["namespace"]; !ok {
		return
	}
	m.Namespace = str(top, "namespace", "", is, true)
	if m.Namespace != "" && (!sandboxapi.ValidIdentity(m.Namespace, MaxNamespacePrefixBytes)) {
		is.add("namespace", top["namespace"].Line, "%q: want 1 to %d bytes without whitespace, control characters, '/' or '\\'", m.Namespace, MaxNamespacePrefixBytes)
	}
}

// parsePolicy reads policy: required, a sandbox policy.
func (m *Manifest) parsePolicy(top map[string]*yaml.Node, is *issues) {
	n, ok := top["policy"]
	if !ok {
		is.add("policy", 0, "required: a sandbox policy (resources, temporaryStorage, network, deadlines, transfers, streams)")
		return
	}
	m.Policy = policy(n, is)
}

// parseScenarios reads scenarios: required, a non-empty list of entries
// that v validates.
func (m *Manifest) parseScenarios(top map[string]*yaml.Node, v Validator, is *issues) {
	n, ok := top["scenarios"]
	switch {
	case !ok:
		is.add("scenarios", 0, "required: a list of {name, params}; allowed names %s", strings.Join(v.Names(), ", "))
	case n.Kind != yaml.SequenceNode || len(n.Content) == 0:
		is.add("scenarios", n.Line, "want a non-empty list of {name, params}")
	default:
		for i, item := range n.Content {
			m.Scenarios = append(m.Scenarios, entry(item, fmt.Sprintf("scenarios[%d]", i), v, is))
		}
	}
}

// fields indexes a mapping's values by key, reporting unknown and
// duplicate keys (the first of duplicates is kept).
func fields(n *yaml.Node, at string, allowed []string, is *issues) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			is.add(at, k.Line, "want string keys, got %s", describe(k))
			continue
		}
		if !slices.Contains(allowed, k.Value) {
			is.add(join(at, k.Value), k.Line, "unknown field: allowed %s", strings.Join(allowed, ", "))
			continue
		}
		if _, dup := out[k.Value]; dup {
			is.add(join(at, k.Value), k.Line, "duplicate field")
			continue
		}
		out[k.Value] = val
	}
	return out
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

// str reads a string scalar field.
func str(f map[string]*yaml.Node, key, prefix string, is *issues, required bool) string {
	n, ok := f[key]
	if !ok {
		if required {
			is.add(prefix+key, 0, "required")
		}
		return ""
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		is.add(prefix+key, n.Line, "want a string, got %s", describe(n))
		return ""
	}
	if required && n.Value == "" {
		is.add(prefix+key, n.Line, "must not be empty")
	}
	return n.Value
}

// id reads a uid or gid in 1..driver.MaxArchiveID.
func id(f map[string]*yaml.Node, key string, is *issues, def uint32) uint32 {
	n, ok := f[key]
	if !ok {
		return def
	}
	var v int64
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&v) != nil || v < 1 || v > driver.MaxArchiveID {
		is.add("user."+key, n.Line, "want an integer from 1 to %d, got %s", driver.MaxArchiveID, describe(n))
		return def
	}
	return uint32(v)
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return fmt.Sprintf("%q (%s)", n.Value, strings.TrimPrefix(n.Tag, "!!"))
}

// entry reads one scenario entry.
func entry(n *yaml.Node, at string, v Validator, is *issues) Entry {
	var e Entry
	if n.Kind != yaml.MappingNode {
		is.add(at, n.Line, "want a mapping {name, params}")
		return e
	}
	f := fields(n, at, []string{"name", "params"}, is)
	e.Name = str(f, "name", at+".", is, true)
	if e.Name == "" {
		return e
	}
	if !slices.Contains(v.Names(), e.Name) {
		is.add(at+".name", f["name"].Line, "unknown scenario %q: allowed %s", e.Name, strings.Join(v.Names(), ", "))
		return e
	}
	if p, ok := f["params"]; ok {
		if p.Kind != yaml.MappingNode {
			is.add(at+".params", p.Line, "want a mapping, got %s", describe(p))
			return e
		}
		if err := p.Decode(&e.Params); err != nil {
			is.add(at+".params", p.Line, "%v", err)
			return e
		}
	}
	if e.Params == nil {
		e.Params = map[string]any{}
	}
	if err := v.Validate(e.Name, e.Params); err != nil {
		line := n.Line
		if p, ok := f["params"]; ok {
			line = p.Line
		}
		is.add(at, line, "scenario %s: %v", e.Name, err)
	}
	return e
}

// policy converts the policy node to JSON and parses it with
// sandboxapi.ParsePolicy, so its issues keep their field paths; each is
// reported under "policy." with the line of the deepest node on its path.
func policy(n *yaml.Node, is *issues) sandboxapi.Policy {
	var tree any
	if err := n.Decode(&tree); err != nil {
		is.add("policy", n.Line, "%v", err)
		return sandboxapi.Policy{}
	}
	data, err := json.Marshal(tree)
	if err != nil {
		is.add("policy", n.Line, "not representable as JSON: %v", err)
		return sandboxapi.Policy{}
	}
	p, err := sandboxapi.ParsePolicy(data)
	if err == nil {
		return p
	}
	var verr *sandboxapi.ValidationError
	if !errors.As(err, &verr) {
		is.add("policy", n.Line, "%v", err)
		return sandboxapi.Policy{}
	}
	for _, issue := range verr.Issues {
		field := "policy"
		if len(issue.Path) > 0 {
			field += "." + strings.Join(issue.Path, ".")
		}
		is.add(field, lineOf(n, issue.Path), "%s", issue.Message)
	}
	return sandboxapi.Policy{}
}

// lineOf follows path through mappings and sequences and returns the line
// of the deepest node found.
func lineOf(n *yaml.Node, path []string) int {
	line := n.Line
	for _, key := range path {
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == key {
					line = n.Content[i].Line
					next = n.Content[i+1]
				}
			}
		case yaml.SequenceNode:
			var idx int
			if _, err := fmt.Sscanf(key, "%d", &idx); err == nil && idx >= 0 && idx < len(n.Content) {
				next = n.Content[idx]
				line = next.Line
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}
