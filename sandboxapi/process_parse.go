package sandboxapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ValidGuestPath reports whether p is an absolute, canonical guest path
// (docs/contract.md#processes-and-streams): it starts with '/', has no empty,
// "." or ".." segment, no trailing '/' unless it is "/", no NUL byte, is valid
// UTF-8 and is at most MaxPathBytes bytes.
func ValidGuestPath(p string) bool {
	return guestPathProblem(p) == ""
}

func guestPathProblem(p string) string {
	switch {
	case p == "":
		return "must be an absolute guest path"
	case len(p) > MaxPathBytes:
		return fmt.Sprintf("must be at most %d bytes", MaxPathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return "must not contain NUL bytes"
	case !utf8.ValidString(p):
		return "must be valid UTF-8"
	case p[0] != '/':
		return "must be an absolute guest path"
	case p == "/":
		return ""
	}
	for _, segment := range strings.Split(p[1:], "/") {
		if segment == "" || segment == "." || segment == ".." {
			return "must be canonical: no empty, \".\" or \"..\" segments and no trailing '/'"
		}
	}
	return ""
}

// ValidEnvName reports whether name is an explicit environment variable
// name: ^[A-Za-z_][A-Za-z0-9_]*$ and at most MaxIdentityBytes bytes.
func ValidEnvName(name string) bool {
	if name == "" || len(name) > MaxIdentityBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alpha := c == '_' || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z')
		if !alpha && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// ParseProcessSpec decodes a JSON process spec strictly
// (docs/contract.md#processes-and-streams): the object has exactly executable,
// args, env and cwd, all required, and satisfies Validate. Issue paths are
// relative to the spec: "executable", "args.3", "env.FOO".
func ParseProcessSpec(data []byte) (ProcessSpec, error) {
	var l issueList
	tree, ok := decodeTree(data, &l)
	if !ok {
		return ProcessSpec{}, l.err()
	}
	o := node{l: &l, v: tree}.object()
	o.only("executable", "args", "env", "cwd")
	spec := ProcessSpec{
		Executable: o.field("executable").str(),
		Cwd:        o.field("cwd").str(),
		Args:       []string{},
		Env:        map[string]string{},
	}
	for _, arg := range o.field("args").array() {
		spec.Args = append(spec.Args, arg.str())
	}
	env := o.field("env").object()
	for _, key := range env.members() {
		spec.Env[key] = env.field(key).str()
	}
	var semantic issueList
	spec.check(&semantic)
	l.merge(&semantic)
	if err := l.err(); err != nil {
		return ProcessSpec{}, err
	}
	return spec, nil
}

// Validate checks a process spec (docs/contract.md#processes-and-streams):
// Executable and Cwd are valid guest paths (ValidGuestPath); at most MaxArgs
// Args, each NUL-free, valid UTF-8 and at most MaxRecipeBytes bytes; at most
// MaxEnvEntries Env entries with names satisfying ValidEnvName and values
// NUL-free, valid UTF-8 and at most MaxEnvValueBytes bytes; and the whole spec's
// JSON encoding (as JSON.stringify writes it) at most MaxRecipeBytes bytes. Nil
// Args and Env are empty. It returns a *ValidationError with paths such as
// "args.3" and "env.FOO"; the aggregate size issue has an empty path.
func (s ProcessSpec) Validate() error {
	var l issueList
	s.check(&l)
	return l.err()
}

func (s ProcessSpec) check(l *issueList) {
	if msg := guestPathProblem(s.Executable); msg != "" {
		l.add([]string{"executable"}, "%s", msg)
	}
	if len(s.Args) > MaxArgs {
		l.add([]string{"args"}, "must have at most %d arguments, got %d", MaxArgs, len(s.Args))
	}
	for i, arg := range s.Args {
		if i >= MaxArgs {
			break
		}
		path := []string{"args", itoa(i)}
		l.text(path, arg, MaxRecipeBytes)
	}
	if len(s.Env) > MaxEnvEntries {
		l.add([]string{"env"}, "must have at most %d entries, got %d", MaxEnvEntries, len(s.Env))
	}
	for _, name := range sortedKeys(s.Env) {
		path := []string{"env", name}
		if !ValidEnvName(name) {
			l.add(path, "name must match ^[A-Za-z_][A-Za-z0-9_]*$ and be at most %d bytes", MaxIdentityBytes)
			continue
		}
		l.text(path, s.Env[name], MaxEnvValueBytes)
	}
	if msg := guestPathProblem(s.Cwd); msg != "" {
		l.add([]string{"cwd"}, "%s", msg)
	}
	if l.ok() {
		if n := s.recipeBytes(); n > MaxRecipeBytes {
			l.add(nil, "process spec JSON encoding is %d bytes, more than %d", n, MaxRecipeBytes)
		}
	}
}

// text reports a string that has a NUL byte, is not UTF-8 or exceeds max.
func (l *issueList) text(path []string, s string, max int) {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		l.add(path, "must not contain NUL bytes")
	case len(s) > max:
		l.add(path, "must be at most %d bytes, got %d", max, len(s))
	case !utf8.ValidString(s):
		l.add(path, "must be valid UTF-8")
	}
}

// recipeBytes is the length of the spec's compact JSON text in the contract's
// field order (docs/contract.md#processes-and-streams):
// {"executable":..,"args":[..],"env":{..},"cwd":..}.
func (s ProcessSpec) recipeBytes() int {
	n := len(`{"executable":,"args":[],"env":{},"cwd":}`)
	n += jsonStringBytes(s.Executable) + jsonStringBytes(s.Cwd)
	for i, arg := range s.Args {
		if i > 0 {
			n++
		}
		n += jsonStringBytes(arg)
	}
	i := 0
	for name, value := range s.Env {
		if i > 0 {
			n++
		}
		n += jsonStringBytes(name) + 1 + jsonStringBytes(value)
		i++
	}
	return n
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Signaled returns the receipt of a leader killed by signal, e.g. "SIGKILL".
func Signaled(signal string) Exit { return Exit{Kind: ExitSignaled, Signal: signal} }

// ParseExit decodes a JSON exit receipt strictly
// (docs/contract.md#processes-and-streams): {"kind":"exited","code":0..255},
// {"kind":"signaled","signal":"SIG..."} or
// {"kind":"unavailable","reason":"sandbox_stopped"}, nothing else. It returns a
// *ValidationError with paths "kind", "code", "signal" or "reason".
func ParseExit(data []byte) (Exit, error) {
	var l issueList
	tree, ok := decodeTree(data, &l)
	if !ok {
		return Exit{}, l.err()
	}
	o := node{l: &l, v: tree}.object()
	var e Exit
	e.Kind = ExitKind(o.field("kind").str())
	switch e.Kind {
	case ExitExited:
		o.only("kind", "code")
		code := o.field("code").integer()
		if code < 0 || code > 255 {
			l.add([]string{"code"}, "must be an integer from 0 to 255, got %d", code)
		} else {
			e.Code = int(code)
		}
	case ExitSignaled:
		o.only("kind", "signal")
		e.Signal = o.field("signal").str()
	case ExitUnavailable:
		o.only("kind", "reason")
		e.Reason = o.field("reason").str()
	}
	if o.m != nil && e.Kind == "" {
		e.Kind = "(missing)"
	}
	var semantic issueList
	e.check(&semantic)
	l.merge(&semantic)
	if err := l.err(); err != nil {
		return Exit{}, err
	}
	return e, nil
}

// Validate checks an exit receipt: kind exited with Code 0..255, signaled
// with Signal matching ^SIG[A-Z0-9]+$ (at most 64 bytes), or unavailable
// with Reason exactly "sandbox_stopped"; fields of the other kinds must be
// zero. It returns a *ValidationError with paths relative to the receipt.
func (e Exit) Validate() error {
	var l issueList
	e.check(&l)
	return l.err()
}

func (e Exit) check(l *issueList) {
	code, signal, reason := e.Code != 0, e.Signal != "", e.Reason != ""
	switch e.Kind {
	case ExitExited:
		code = false
		if e.Code < 0 || e.Code > 255 {
			l.add([]string{"code"}, "must be an integer from 0 to 255, got %d", e.Code)
		}
	case ExitSignaled:
		signal = false
		if !validSignal(e.Signal) {
			l.add([]string{"signal"}, "must match ^SIG[A-Z0-9]+$ and be at most 64 bytes")
		}
	case ExitUnavailable:
		reason = false
		if e.Reason != ReasonSandboxStopped {
			l.add([]string{"reason"}, "must be %q", ReasonSandboxStopped)
		}
	default:
		l.add([]string{"kind"}, "must be %q, %q or %q", ExitExited, ExitSignaled, ExitUnavailable)
		return
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"code", code}, {"signal", signal}, {"reason", reason}} {
		if f.set {
			l.add([]string{f.name}, "not allowed when kind is %q", e.Kind)
		}
	}
}

func validSignal(s string) bool {
	if len(s) <= 3 || len(s) > 64 || !strings.HasPrefix(s, "SIG") {
		return false
	}
	for i := 3; i < len(s); i++ {
		if c := s[i]; (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// String renders the receipt for logs: "exited with code 7",
// "killed by SIGKILL" or "unavailable: sandbox_stopped".
func (e Exit) String() string {
	switch e.Kind {
	case ExitExited:
		return fmt.Sprintf("exited with code %d", e.Code)
	case ExitSignaled:
		return "killed by " + e.Signal
	case ExitUnavailable:
		return "unavailable: " + e.Reason
	}
	return fmt.Sprintf("invalid exit %q", string(e.Kind))
}

// MarshalJSON writes exactly the contract's shape for e.Kind, so an exit with
// code 0 keeps its "code" field. Other kinds' fields are not written.
func (e Exit) MarshalJSON() ([]byte, error) {
	switch e.Kind {
	case ExitExited:
		return json.Marshal(struct {
			Kind ExitKind `json:"kind"`
			Code int      `json:"code"`
		}{e.Kind, e.Code})
	case ExitSignaled:
		return json.Marshal(struct {
			Kind   ExitKind `json:"kind"`
			Signal string   `json:"signal"`
		}{e.Kind, e.Signal})
	case ExitUnavailable:
		return json.Marshal(struct {
			Kind   ExitKind `json:"kind"`
			Reason string   `json:"reason"`
		}{e.Kind, e.Reason})
	}
	return nil, fmt.Errorf("sandbox: cannot marshal exit of kind %q", string(e.Kind))
}
