package facts

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzDecode: Decode never panics and refuses with a *DecodeError; what it
// accepts is within MaxFactsBytes and survives a marshal/decode round trip
// (docs/untrusted-inputs.md: the guest writes these bytes).
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		facts, err := Decode(data)
		if err != nil {
			var derr *DecodeError
			if !errors.As(err, &derr) {
				t.Fatalf("refusal is %T, not *DecodeError: %v", err, err)
			}
			return
		}
		if len(data) > MaxFactsBytes {
			t.Fatalf("accepted %d bytes", len(data))
		}
		out, err := json.Marshal(facts)
		if err != nil {
			t.Fatalf("marshal accepted facts: %v", err)
		}
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("decode of re-marshalled %s: %v", out, err)
		}
		// The probe's encoding omits empty lists (omitempty), so an empty
		// list and an absent one are the same facts.
		if diff := cmp.Diff(facts, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip differs (-first +again):\n%s\ninput: %q", diff, data)
		}
		// Every top-level key is a field name spelled exactly.
		var top map[string]json.RawMessage
		if err := json.Unmarshal(data, &top); err != nil {
			t.Fatalf("accepted input is not an object: %v", err)
		}
		for k := range top {
			if _, ok := jsonField(reflect.TypeFor[Facts](), k); !ok {
				t.Fatalf("accepted key %q, not a Facts field\ninput: %q", k, data)
			}
		}
	})
}

// escapeMount writes a mountinfo path field the way the kernel would,
// octal-escaping every byte that is not printable ASCII, and '\' itself.
func escapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			fmt.Fprintf(&b, `\%03o`, c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// FuzzParseMountinfo: ParseMountinfo never panics; the entries it accepts,
// written back as mountinfo lines, parse to the same entries, and Covering
// finds a mount only among them.
func FuzzParseMountinfo(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, probe string) {
		entries, err := ParseMountinfo(data)
		if err != nil {
			return
		}
		var b strings.Builder
		for _, e := range entries {
			fmt.Fprintf(&b, "%d %d %s %s %s %s", e.ID, e.ParentID, e.MajorMinor, escapeMount(e.Root), escapeMount(e.MountPoint), strings.Join(e.MountOptions, ","))
			for _, o := range e.Optional {
				b.WriteString(" " + o)
			}
			fmt.Fprintf(&b, " - %s %s %s\n", e.FSType, escapeMount(e.Source), strings.Join(e.SuperOptions, ","))
		}
		again, err := ParseMountinfo([]byte(b.String()))
		if err != nil {
			t.Fatalf("written-back mountinfo %q: %v\ninput: %q", b.String(), err, data)
		}
		if diff := cmp.Diff(entries, again); diff != "" {
			t.Fatalf("round trip differs (-first +again):\n%s\ninput: %q", diff, data)
		}
		m := Covering(entries, "/"+probe)
		if m.Found && !containsMount(entries, m.MountPoint) {
			t.Fatalf("Covering found %q, not among the entries", m.MountPoint)
		}
		if m.SizeBytes < 0 {
			t.Fatalf("negative size %d from %q", m.SizeBytes, m.Size)
		}
	})
}

func containsMount(entries []MountinfoEntry, mp string) bool {
	for _, e := range entries {
		if e.MountPoint == mp {
			return true
		}
	}
	return false
}

// FuzzParseStatus: ParseStatus never panics; what it accepts has 16-digit
// hex capability masks, and written back as status lines parses the same.
func FuzzParseStatus(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseStatus(data)
		if err != nil {
			return
		}
		var b strings.Builder
		for _, c := range []struct{ k, v string }{{"CapInh", s.CapInh}, {"CapPrm", s.CapPrm}, {"CapEff", s.CapEff}, {"CapBnd", s.CapBnd}, {"CapAmb", s.CapAmb}} {
			if len(c.v) != 16 || strings.Trim(c.v, "0123456789abcdefABCDEF") != "" {
				t.Fatalf("accepted %s %q", c.k, c.v)
			}
			fmt.Fprintf(&b, "%s:\t%s\n", c.k, c.v)
		}
		fmt.Fprintf(&b, "NoNewPrivs:\t%d\nSeccomp:\t%d\n", s.NoNewPrivs, s.Seccomp)
		if s.SeccompFilters != -1 {
			fmt.Fprintf(&b, "Seccomp_filters:\t%d\n", s.SeccompFilters)
		}
		again, err := ParseStatus([]byte(b.String()))
		if err != nil {
			t.Fatalf("written-back status %q: %v", b.String(), err)
		}
		if again != s {
			t.Fatalf("round trip differs: %+v, then %+v\ninput: %q", s, again, data)
		}
	})
}

// Decode refuses more than MaxFactsBytes before decoding, and anything but
// one facts object.
func TestDecodeRefusals(t *testing.T) {
	big := `{"hostname":"` + strings.Repeat("h", MaxFactsBytes) + `"}`
	for name, data := range map[string]string{
		"oversize":      big,
		"two objects":   `{}{}`,
		"unknown field": `{"extra":1}`,
		"array":         `[{}]`,
		"empty":         ``,
		"case-folded":   `{"SCHEMA":"x"}`,
		"nested case":   `{"status":{"CapEff":"0000000000000000"}}`,
		"duplicate":     `{"hostname":"a","hostname":"b"}`,
		"deep":          `{"errors":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`,
	} {
		_, err := Decode([]byte(data))
		var derr *DecodeError
		if !errors.As(err, &derr) {
			t.Errorf("%s: %v, want *DecodeError", name, err)
		}
	}
	rec, err := Decode(read(t, recorded+"facts.json"))
	if err != nil || rec.Schema != Schema || rec.Identity.UID != 65534 || len(rec.Mounts) == 0 {
		t.Fatalf("recorded probe output: %+v, %v", rec, err)
	}
	f, err := Decode([]byte(`{"schema":"` + Schema + `","hostname":"h"}` + "\n"))
	if err != nil || f.Schema != Schema || f.Hostname != "h" {
		t.Fatalf("one object with a newline: %+v, %v", f, err)
	}
}
