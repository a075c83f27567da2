package attest

import (
	"errors"
	"fmt"
	"io"
)

// Limits on what Verify reads from a report directory. A report comes from
// another host and is hostile until verified (docs/untrusted-inputs.md):
// every file and every JSON value is read under these bounds, and crossing
// one is a *LimitError naming it, never an allocation of the whole input.
const (
	// MaxEnvelopeBytes bounds evidence.dsse.json. A real envelope of a
	// 15-scenario run is about 10 KiB; MaxSubjects subjects fit in 2 MiB.
	MaxEnvelopeBytes = 4 << 20
	// MaxSignatures bounds the envelope's signature list.
	MaxSignatures = 16
	// MaxSubjects bounds the Statement's subject list.
	MaxSubjects = 4096
	// MaxFileBytes bounds a subject file that is read into memory to be
	// parsed (evidence JSON, junit.xml, summary.md). The largest real
	// scenario evidence is about 110 KiB.
	MaxFileBytes = 8 << 20
	// MaxParsedBytes bounds the sum of the subject files Verify holds in
	// memory at once to parse them (each at most MaxFileBytes): they are
	// kept from hashing until the predicate check so that what is parsed
	// is what was hashed. A real report holds about 2 MiB of them.
	MaxParsedBytes = 64 << 20
	// MaxSubjectBytes bounds a subject file that is only hashed.
	MaxSubjectBytes = 256 << 20
	// MaxJSONDepth bounds the nesting of arrays and objects in any JSON
	// document Verify decodes (real evidence nests 9 deep).
	MaxJSONDepth = 32
	// MaxJSONValues bounds the number of values (scalars, arrays, objects)
	// in one JSON document, so that decoding MaxFileBytes of tiny values
	// into interfaces cannot take hundreds of MiB.
	MaxJSONValues = 200_000
)

// LimitError says that an input crossed one of the limits above.
type LimitError struct {
	// File is the file concerned, relative to the report directory.
	File string
	// Limit is the name of the limit, e.g. "MaxEnvelopeBytes".
	Limit string
	// Max is the limit's value (bytes, levels or entries).
	Max int64
	// Got is the size or count seen, or -1 when reading stopped at Max+1.
	Got int64
}

func (e *LimitError) Error() string {
	if e.Got < 0 {
		return fmt.Sprintf("%s: exceeds %s (%d)", e.File, e.Limit, e.Max)
	}
	return fmt.Sprintf("%s: %d exceeds %s (%d)", e.File, e.Got, e.Limit, e.Max)
}

// ReadBounded reads r to EOF, failing with a *LimitError (file, limit
// named limit) as soon as more than max bytes arrive: at most max+1 bytes
// are ever buffered, whatever r holds.
func ReadBounded(r io.Reader, file, limit string, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, &LimitError{File: file, Limit: limit, Max: max, Got: -1}
	}
	return data, nil
}

// errSyntax is returned by scanJSON for input the decoder would reject
// anyway; decoding then reports the precise syntax error.
var errSyntax = errors.New("json syntax")

// scanJSON walks data once without allocating and enforces MaxJSONDepth
// and MaxJSONValues before any decoder builds values from it. It only
// tracks strings and brackets; malformed input is left to the decoder.
func scanJSON(data []byte, file string) error {
	depth, values := 0, 0
	inString, escaped, inScalar := false, false, false
	count := func() error {
		values++
		if values > MaxJSONValues {
			return &LimitError{File: file, Limit: "MaxJSONValues", Max: MaxJSONValues, Got: -1}
		}
		return nil
	}
	for _, c := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString, inScalar = true, false
			if err := count(); err != nil {
				return err
			}
		case '[', '{':
			inScalar = false
			depth++
			if depth > MaxJSONDepth {
				return &LimitError{File: file, Limit: "MaxJSONDepth", Max: MaxJSONDepth, Got: -1}
			}
			if err := count(); err != nil {
				return err
			}
		case ']', '}':
			inScalar = false
			depth--
			if depth < 0 {
				return errSyntax
			}
		case ',', ':', ' ', '\t', '\r', '\n':
			inScalar = false
		default:
			// A number, true, false or null: one value per run of bytes.
			if !inScalar {
				inScalar = true
				if err := count(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
