package facts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// maxFactsDepth bounds JSON nesting; Facts nests 4 deep
// (mounts[i].mountOptions[j]).
const maxFactsDepth = 16

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
// most MaxFactsBytes, nested at most 16 deep, optionally followed by white
// space. Every key is a Facts field spelled exactly as the probe writes it
// (encoding/json alone would match "CAPEFF" to capEff) and appears once
// per object, so the raw output recorded as evidence and the values the
// host checks cannot disagree. It does not check Schema; callers record
// that as a check. It returns *DecodeError.
func Decode(data []byte) (Facts, error) {
	var f Facts
	if len(data) > MaxFactsBytes {
		return f, &DecodeError{Problem: fmt.Sprintf("%d bytes, more than the limit of %d", len(data), MaxFactsBytes)}
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return f, &DecodeError{Problem: "not a JSON object"}
	}
	keys := json.NewDecoder(bytes.NewReader(data))
	if err := checkKeys(keys, reflect.TypeFor[Facts](), nil, 0); err != nil {
		var derr *DecodeError
		if errors.As(err, &derr) {
			return f, derr
		}
		return f, &DecodeError{Problem: "invalid JSON", Err: err}
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

// checkKeys walks one JSON value from dec against t (nil: no constraint)
// and refuses keys that are not t's json field names exactly, duplicate
// keys, and nesting beyond maxFactsDepth.
func checkKeys(dec *json.Decoder, t reflect.Type, path []string, depth int) error {
	if depth > maxFactsDepth {
		return &DecodeError{Problem: fmt.Sprintf("nested deeper than %d at %s", maxFactsDepth, where(path))}
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			at := append(path[:len(path):len(path)], key)
			if seen[key] {
				return &DecodeError{Problem: "duplicate key " + where(at)}
			}
			seen[key] = true
			var child reflect.Type
			if t != nil {
				switch t.Kind() {
				case reflect.Struct:
					f, ok := jsonField(t, key)
					if !ok {
						return &DecodeError{Problem: "unknown key " + where(at)}
					}
					child = f.Type
				case reflect.Map:
					child = t.Elem()
				}
			}
			if err := checkKeys(dec, child, at, depth+1); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && t.Kind() == reflect.Slice {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := checkKeys(dec, elem, append(path[:len(path):len(path)], fmt.Sprint(i)), depth+1); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	}
	return nil
}

// jsonField finds t's field whose json name is exactly key, looking into
// embedded structs as encoding/json does.
func jsonField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			if inner, ok := jsonField(f.Type, key); ok {
				return inner, true
			}
			continue
		}
		if name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func where(path []string) string {
	if len(path) == 0 {
		return "(root)"
	}
	return fmt.Sprintf("%q", strings.Join(path, "."))
}
