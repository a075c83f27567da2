package profiles

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/qualbox/qualbox/profiles/yamlbounds"
)

// The document types mirror Profile with pointers, so that an absent field
// is told apart from a zero value (desktop: false, workloadProfile: "").
type document struct {
	Name            *string           `yaml:"name"`
	BackendRevision *string           `yaml:"backendRevision"`
	Controller      *platformDoc      `yaml:"controller"`
	Daemon          *daemonDoc        `yaml:"daemon"`
	Image           *imageDoc         `yaml:"image"`
	Runtime         *string           `yaml:"runtime"`
	Cgroup          *cgroupDoc        `yaml:"cgroup"`
	AppArmor        *appArmorDoc      `yaml:"appArmor"`
	Seccomp         *seccompDoc       `yaml:"seccomp"`
	Datasets        *datasetsDoc      `yaml:"datasets"`
	Qualification   *qualificationDoc `yaml:"qualification"`
}

type platformDoc struct {
	OS           *string `yaml:"os"`
	Architecture *string `yaml:"architecture"`
}

type daemonDoc struct {
	Architecture      *string  `yaml:"architecture"`
	InfoArchitectures []string `yaml:"infoArchitectures"`
	MinAPIVersion     *string  `yaml:"minAPIVersion"`
	Desktop           *bool    `yaml:"desktop"`
	OperatingSystem   *string  `yaml:"operatingSystem"`
}

type imageDoc struct {
	Architecture *string `yaml:"architecture"`
}

type cgroupDoc struct {
	Version   *int          `yaml:"version"`
	Driver    *string       `yaml:"driver"`
	Namespace *namespaceDoc `yaml:"namespace"`
}

type namespaceDoc struct {
	SecurityOption       *bool `yaml:"securityOption"`
	PerContainerReadback *bool `yaml:"perContainerReadback"`
}

type appArmorDoc struct {
	Daemon          *string `yaml:"daemon"`
	WorkloadProfile *string `yaml:"workloadProfile"`
}

type seccompDoc struct {
	SecurityOptions []string `yaml:"securityOptions"`
}

type datasetsDoc struct {
	MinEngineVersion *string          `yaml:"minEngineVersion"`
	MinAPIVersion    *string          `yaml:"minAPIVersion"`
	StorageDriver    *string          `yaml:"storageDriver"`
	DriverType       *string          `yaml:"driverType"`
	ModuleBuilds     []moduleBuildDoc `yaml:"moduleBuilds"`
}

type moduleBuildDoc struct {
	Module  *string `yaml:"module"`
	Version *string `yaml:"version"`
}

type qualificationDoc struct {
	Status *string `yaml:"status"`
	Note   *string `yaml:"note"`
}

// InvalidProfileError reports a profile document that cannot be decoded or
// does not validate. Every issue names the field path in the document.
type InvalidProfileError struct {
	// File is the document's file name, for example "linux-x64.yaml".
	File string
	// Issues lists the problems in document order, at least one.
	Issues []Issue
	// Limit is set when the document exceeds a parser bound; Unwrap
	// returns it, so errors.As finds a *LimitError.
	Limit *LimitError
}

// Unwrap returns the exceeded bound, or nil.
func (e *InvalidProfileError) Unwrap() error {
	if e.Limit == nil {
		return nil
	}
	return e.Limit
}

// Bounds on a profile document (docs/untrusted-inputs.md). Profiles are
// embedded, but a profile document is still YAML that a change can make
// hostile; the parser refuses documents beyond these before decoding.
const (
	// MaxBytes bounds a profile document, in bytes.
	MaxBytes = 64 << 10
	// MaxDepth bounds the nesting of mappings and sequences, aliases
	// counted where they are used.
	MaxDepth = 16
	// MaxNodes bounds the YAML nodes with every alias expanded.
	MaxNodes = 10_000
	// MaxScalarBytes bounds one scalar (key or value), in bytes.
	MaxScalarBytes = 4 << 10
)

// LimitError reports a profile document beyond one of its bounds.
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
	return fmt.Sprintf("profile document exceeds %s (%d)", e.Limit, e.Max)
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

// Issue is one problem in a profile document.
type Issue struct {
	// Field is the dotted field path, for example "cgroup.version"; it is
	// empty for problems with the whole document.
	Field string
	// Problem says what is wrong.
	Problem string
}

var _ error = (*InvalidProfileError)(nil)

func (e *InvalidProfileError) Error() string {
	parts := make([]string, len(e.Issues))
	for i, issue := range e.Issues {
		if issue.Field == "" {
			parts[i] = issue.Problem
		} else {
			parts[i] = issue.Field + ": " + issue.Problem
		}
	}
	return fmt.Sprintf("profiles: %s: %s", e.File, strings.Join(parts, "; "))
}

// issues collects problems under field paths.
type issues []Issue

func (is *issues) add(field, format string, args ...any) {
	*is = append(*is, Issue{Field: field, Problem: fmt.Sprintf(format, args...)})
}

// parse decodes and validates the document data of the profile name (the
// file name without ".yaml"). It returns *InvalidProfileError, wrapping a
// *LimitError when data exceeds MaxBytes, MaxDepth, MaxNodes or
// MaxScalarBytes.
func parse(name string, data []byte) (Profile, error) {
	file := name + ".yaml"
	invalid := func(is issues) error { return &InvalidProfileError{File: file, Issues: is} }
	limit := func(l *LimitError) error {
		return &InvalidProfileError{File: file, Issues: issues{{Problem: l.Error()}}, Limit: l}
	}

	if len(data) > MaxBytes {
		return Profile{}, limit(&LimitError{Limit: "MaxBytes", Max: MaxBytes})
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Profile{}, invalid(issues{{Problem: err.Error()}})
	}
	if l := checkBounds(&root); l != nil {
		return Profile{}, limit(l)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 {
		return Profile{}, invalid(issues{{Problem: "want exactly one YAML document"}})
	}
	var is issues
	checkNode(root.Content[0], reflect.TypeFor[document](), "", &is)
	if len(is) > 0 {
		return Profile{}, invalid(is)
	}

	// The walk above gives field paths; the strict decoder stays as the
	// authority on what is decoded, including a second document.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var doc document
	if err := dec.Decode(&doc); err != nil {
		return Profile{}, invalid(issues{{Problem: err.Error()}})
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		return Profile{}, invalid(issues{{Problem: "want exactly one YAML document"}})
	}

	p := doc.profile(&is)
	if len(is) == 0 {
		validate(name, p, &is)
	}
	if len(is) > 0 {
		return Profile{}, invalid(is)
	}
	return p, nil
}

// checkNode walks node against the document type t and reports unknown
// fields, duplicate keys and values that do not decode into their field's
// type, each under its field path.
func checkNode(node *yaml.Node, t reflect.Type, path string, is *issues) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	at := func(key string) string {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	switch t.Kind() {
	case reflect.Struct:
		if node.Kind != yaml.MappingNode {
			is.add(path, "want a mapping (line %d)", node.Line)
			return
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(node.Content); i += 2 {
			key, value := node.Content[i], node.Content[i+1]
			field, ok := fieldByTag(t, key.Value)
			switch {
			case !ok:
				is.add(at(key.Value), "unknown field (line %d)", key.Line)
			case seen[key.Value]:
				is.add(at(key.Value), "duplicate field (line %d)", key.Line)
			default:
				checkNode(value, field.Type, at(key.Value), is)
			}
			seen[key.Value] = true
		}
	case reflect.Slice:
		if node.Kind != yaml.SequenceNode {
			is.add(path, "want a sequence (line %d)", node.Line)
			return
		}
		for i, item := range node.Content {
			checkNode(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), is)
		}
	default:
		if node.Kind != yaml.ScalarNode {
			is.add(path, "want a %s scalar (line %d)", t.Kind(), node.Line)
			return
		}
		if err := node.Decode(reflect.New(t).Interface()); err != nil {
			is.add(path, "want a %s, got %q (line %d)", t.Kind(), node.Value, node.Line)
		}
	}
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if strings.Split(f.Tag.Get("yaml"), ",")[0] == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// profile converts the decoded document, reporting absent required fields.
func (d *document) profile(is *issues) Profile {
	var p Profile
	p.Name = need(is, "name", d.Name)
	p.BackendRevision = need(is, "backendRevision", d.BackendRevision)
	if c := section(is, "controller", d.Controller); c != nil {
		p.Controller = Platform{
			OS:           need(is, "controller.os", c.OS),
			Architecture: need(is, "controller.architecture", c.Architecture),
		}
	}
	if dd := section(is, "daemon", d.Daemon); dd != nil {
		p.Daemon = Daemon{
			Architecture:      need(is, "daemon.architecture", dd.Architecture),
			InfoArchitectures: needList(is, "daemon.infoArchitectures", dd.InfoArchitectures),
			MinAPIVersion:     need(is, "daemon.minAPIVersion", dd.MinAPIVersion),
			Desktop:           need(is, "daemon.desktop", dd.Desktop),
		}
		if dd.OperatingSystem != nil {
			p.Daemon.OperatingSystem = *dd.OperatingSystem
		}
	}
	if im := section(is, "image", d.Image); im != nil {
		p.Image = Image{Architecture: need(is, "image.architecture", im.Architecture)}
	}
	p.Runtime = need(is, "runtime", d.Runtime)
	if c := section(is, "cgroup", d.Cgroup); c != nil {
		p.Cgroup = Cgroup{
			Version: need(is, "cgroup.version", c.Version),
			Driver:  need(is, "cgroup.driver", c.Driver),
		}
		if n := section(is, "cgroup.namespace", c.Namespace); n != nil {
			p.Cgroup.Namespace = CgroupNamespace{
				SecurityOption:       need(is, "cgroup.namespace.securityOption", n.SecurityOption),
				PerContainerReadback: need(is, "cgroup.namespace.perContainerReadback", n.PerContainerReadback),
			}
		}
	}
	if a := section(is, "appArmor", d.AppArmor); a != nil {
		p.AppArmor = AppArmor{
			Daemon:          need(is, "appArmor.daemon", a.Daemon),
			WorkloadProfile: need(is, "appArmor.workloadProfile", a.WorkloadProfile),
		}
	}
	if s := section(is, "seccomp", d.Seccomp); s != nil {
		p.Seccomp = Seccomp{SecurityOptions: needList(is, "seccomp.securityOptions", s.SecurityOptions)}
	}
	if ds := section(is, "datasets", d.Datasets); ds != nil {
		p.Datasets = DatasetRequirements{
			MinEngineVersion: need(is, "datasets.minEngineVersion", ds.MinEngineVersion),
			MinAPIVersion:    need(is, "datasets.minAPIVersion", ds.MinAPIVersion),
			StorageDriver:    need(is, "datasets.storageDriver", ds.StorageDriver),
			DriverType:       need(is, "datasets.driverType", ds.DriverType),
		}
		for i, mb := range ds.ModuleBuilds {
			field := fmt.Sprintf("datasets.moduleBuilds[%d]", i)
			p.Datasets.ModuleBuilds = append(p.Datasets.ModuleBuilds, ModuleBuild{
				Module:  need(is, field+".module", mb.Module),
				Version: need(is, field+".version", mb.Version),
			})
		}
	}
	if q := section(is, "qualification", d.Qualification); q != nil {
		p.Qualification = Qualification{
			Status: need(is, "qualification.status", q.Status),
			Note:   need(is, "qualification.note", q.Note),
		}
	}
	return p
}

func need[T any](is *issues, field string, v *T) T {
	if v == nil {
		is.add(field, "missing")
		var zero T
		return zero
	}
	return *v
}

func section[T any](is *issues, field string, v *T) *T {
	if v == nil {
		is.add(field, "missing")
	}
	return v
}

func needList(is *issues, field string, v []string) []string {
	if len(v) == 0 {
		is.add(field, "missing or empty")
	}
	return v
}
