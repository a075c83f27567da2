package facts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// MaxFactsBytes bounds the probe's facts output that Decode accepts, in
// bytes. The guest controls that output; a real facts object is about
// 4 KiB, so 1 MiB leaves room for many mounts without letting the guest
// decide the host's memory (docs/untrusted-inputs.md).
const MaxFactsBytes = 1 << 20

// DecodeError reports probe facts output that Decode refuses: more than
// MaxFactsBytes, not exactly one JSON object, or a field Facts does not
// have.
type DecodeError struct {
	// Problem says what is wrong.
	Problem string
	// Err is the JSON decoder's error, if any.
	Err error
}

var _ error = (*DecodeError)(nil)

func (e *DecodeError) Error() string {
	if e.Err != nil {
		return "probe facts: " + e.Problem + ": " + e.Err.Error()
	}
	return "probe facts: " + e.Problem
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Decode parses the probe's `facts` output: exactly one JSON object of at
// most MaxFactsBytes with no field outside Facts, optionally followed by
// white space. It does not check Schema; callers record that as a check.
// It returns *DecodeError.
func Decode(data []byte) (Facts, error) {
	var f Facts
	if len(data) > MaxFactsBytes {
		return f, &DecodeError{Problem: fmt.Sprintf("%d bytes, more than the limit of %d", len(data), MaxFactsBytes)}
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return f, &DecodeError{Problem: "not a JSON object"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Facts{}, &DecodeError{Problem: "invalid JSON", Err: err}
	}
	if _, err := dec.Token(); err != io.EOF {
		return Facts{}, &DecodeError{Problem: "data after the facts object"}
	}
	return f, nil
}
