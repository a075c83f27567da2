package sandboxapi

// Strict JSON decoding for the parsers in this package.
//
// encoding/json cannot do what the contract's strict parsing needs:
// DisallowUnknownFields stops at the first unknown field and names no path, a
// typed decode reports one type error at a time, silently keeps the last of
// duplicate keys and cannot tell 1.5 from 1 for an int64 without a vague error.
// So parsers decode into a generic tree (json.Decoder token by token, UseNumber
// keeping numbers exact), walk it with a path, and collect every issue. Range
// and format rules then run once on the typed Go value, shared with the
// Normalize/Validate methods, and issues at or below a path that already has a
// structural issue are dropped, so "memoryBytes": "1" reports one issue.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// maxIssues bounds the issues one ValidationError carries, so hostile input
// cannot make the error itself unbounded.
const maxIssues = 100

// maxDepth bounds JSON nesting; every contract shape is at most 4 deep.
const maxDepth = 32

// issueList collects issues with paths.
type issueList struct {
	issues  []Issue
	omitted bool
}

func (l *issueList) add(path []string, format string, args ...any) {
	if len(l.issues) >= maxIssues {
		l.omitted = true
		return
	}
	l.issues = append(l.issues, Issue{Path: slices.Clone(path), Message: fmt.Sprintf(format, args...)})
}

func (l *issueList) ok() bool { return len(l.issues) == 0 }

// err returns nil or a *ValidationError holding the collected issues.
func (l *issueList) err() error {
	if len(l.issues) == 0 {
		return nil
	}
	issues := slices.Clone(l.issues)
	if l.omitted {
		issues = append(issues, Issue{Message: "further issues omitted"})
	}
	return &ValidationError{Issues: issues}
}

// merge appends the semantic issues of other that do not concern a path at
// or below one that already has an issue in l.
func (l *issueList) merge(other *issueList) {
	reported := slices.Clone(l.issues)
	for _, issue := range other.issues {
		covered := false
		for _, r := range reported {
			if hasPrefix(issue.Path, r.Path) {
				covered = true
				break
			}
		}
		if !covered {
			l.add(issue.Path, "%s", issue.Message)
		}
	}
	l.omitted = l.omitted || other.omitted
}

func hasPrefix(path, prefix []string) bool {
	return len(path) >= len(prefix) && slices.Equal(path[:len(prefix)], prefix)
}

// at returns a new path: path followed by elems. It never aliases path.
func at(path []string, elems ...string) []string {
	out := make([]string, 0, len(path)+len(elems))
	return append(append(out, path...), elems...)
}

// rootIssue returns a *ValidationError with one issue about the whole value.
func rootIssue(format string, args ...any) error {
	return &ValidationError{Issues: []Issue{{Message: fmt.Sprintf(format, args...)}}}
}

// jsonObject is a decoded JSON object; keys keeps input order so issues come
// out in a stable order.
type jsonObject struct {
	keys   []string
	values map[string]any
}

// decodeTree decodes exactly one JSON value into a tree of *jsonObject,
// []any, string, json.Number, bool and nil. Duplicate keys are issues at the
// duplicate's path; syntax errors and trailing data are the one root issue
// of a malformed document, replacing any duplicates seen before them.
func decodeTree(data []byte, l *issueList) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readValue(dec, nil, l, 0)
	if err != nil {
		*l = issueList{}
		l.add(nil, "invalid JSON: %v", err)
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		*l = issueList{}
		l.add(nil, "invalid JSON: data after the top-level value")
		return nil, false
	}
	return v, true
}

var errTooDeep = errors.New("nesting too deep")

func readValue(dec *json.Decoder, path []string, l *issueList, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch delim {
	case '{':
		obj := &jsonObject{values: map[string]any{}}
		for dec.More() {
			keyTok, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := keyTok.(string)
			child := at(path, key)
			v, err := readValue(dec, child, l, depth+1)
			if err != nil {
				return nil, err
			}
			if _, dup := obj.values[key]; dup {
				l.add(child, "duplicate field")
				continue
			}
			obj.keys = append(obj.keys, key)
			obj.values[key] = v
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return obj, nil
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := readValue(dec, at(path, strconv.Itoa(len(arr))), l, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return arr, nil
	}
	return nil, fmt.Errorf("unexpected %v", delim)
}

// kindOf names a tree value's JSON kind for messages.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case *jsonObject:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// node is a tree value at a path. Accessors report structural issues (wrong
// kind, missing or unknown fields, numbers that are not integers or do not
// fit int64) and return zero values, so one walk reports everything.
type node struct {
	l    *issueList
	path []string
	v    any
}

// obj is an object node; m is nil when the value was not an object.
type obj struct {
	node
	m *jsonObject
}

func (n node) wrongKind(want string) {
	n.l.add(n.path, "expected %s, got %s", want, kindOf(n.v))
}

func (n node) object() obj {
	m, ok := n.v.(*jsonObject)
	if !ok {
		n.wrongKind("object")
	}
	return obj{node: n, m: m}
}

func (n node) str() string {
	s, ok := n.v.(string)
	if !ok {
		n.wrongKind("string")
	}
	return s
}

func (n node) array() []node {
	arr, ok := n.v.([]any)
	if !ok {
		n.wrongKind("array")
		return nil
	}
	out := make([]node, len(arr))
	for i, v := range arr {
		out[i] = node{l: n.l, path: at(n.path, strconv.Itoa(i)), v: v}
	}
	return out
}

// integer accepts any JSON number with an integral value that fits int64
// (1, 1.0 and 1e3 as JavaScript's Number.isInteger would); ranges are
// checked later on the Go value.
func (n node) integer() int64 {
	num, ok := n.v.(json.Number)
	if !ok {
		n.wrongKind("integer")
		return 0
	}
	if i, err := strconv.ParseInt(string(num), 10, 64); err == nil {
		return i
	}
	f, err := strconv.ParseFloat(string(num), 64)
	switch {
	case err != nil || math.IsInf(f, 0):
		n.l.add(n.path, "number out of range")
	case f != math.Trunc(f):
		n.l.add(n.path, "expected an integer, got %s", num)
	case f < math.MinInt64 || f >= math.MaxInt64:
		n.l.add(n.path, "number out of range")
	default:
		return int64(f)
	}
	return 0
}

// number accepts any finite JSON number.
func (n node) number() float64 {
	num, ok := n.v.(json.Number)
	if !ok {
		n.wrongKind("number")
		return 0
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || math.IsInf(f, 0) {
		n.l.add(n.path, "number out of range")
		return 0
	}
	return f
}

// only reports every field of o not named in allowed.
func (o obj) only(allowed ...string) {
	if o.m == nil {
		return
	}
	for _, key := range o.m.keys {
		if !slices.Contains(allowed, key) {
			o.l.add(at(o.path, key), "unknown field")
		}
	}
}

// has reports whether the field is present (null counts as present).
func (o obj) has(key string) bool {
	if o.m == nil {
		return false
	}
	_, ok := o.m.values[key]
	return ok
}

// field returns the named member; a missing one is an issue. When o is not
// an object the returned node is empty and its accessors stay silent.
func (o obj) field(key string) node {
	if o.m == nil {
		return node{l: &issueList{}, path: at(o.path, key)}
	}
	v, ok := o.m.values[key]
	if !ok {
		o.l.add(at(o.path, key), "required")
		return node{l: &issueList{}, path: at(o.path, key)}
	}
	return node{l: o.l, path: at(o.path, key), v: v}
}

// optional returns the named member and whether it is present.
func (o obj) optional(key string) (node, bool) {
	if !o.has(key) {
		return node{}, false
	}
	return o.field(key), true
}

// members returns the object's members in input order.
func (o obj) members() []string {
	if o.m == nil {
		return nil
	}
	return o.m.keys
}

// jsonStringBytes is the UTF-8 length of s encoded as a JSON string by
// JavaScript's JSON.stringify, the text the contract's size bounds count
// (docs/contract.md#policy).
func jsonStringBytes(s string) int {
	n := 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			n += 2
		case c < 0x20:
			n += 6
		default:
			n++
		}
	}
	return n
}

// marshalCompact encodes v as compact JSON without HTML escaping, the way
// JSON.stringify does, for size bounds.
func marshalCompact(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// quote renders a value for messages, bounded so huge inputs stay out of
// errors.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "..."
	}
	return strconv.Quote(s)
}

func itoa(i int) string { return strconv.Itoa(i) }
