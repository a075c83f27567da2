package observer

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/qualbox/qualbox/qualify/attest"
)

// Schema identifies the Observation JSON layout.
const Schema = "qualbox.observation.v1"

// PredicateType is the in-toto predicateType of a signed observation.
const PredicateType = "https://qualbox.dev/observation/v1"

// Observation file names inside an observer output directory.
const (
	ObservationFile = "observation.json"
	TableFile       = "observation.txt"
)

// Observation is what cmd/observe records for one scope.
type Observation struct {
	Schema string `json:"schema"`
	// Container is the container ID the keeper PID was resolved from;
	// empty when the PID was given.
	Container string     `json:"container,omitempty"`
	Scope     Scope      `json:"scope"`
	Snapshots []Snapshot `json:"snapshots"`
	// Absence is the scope's state at the end; nil when not checked.
	Absence *Absence `json:"absence,omitempty"`
}

// Predicate is the signed summary of an observation.
type Predicate struct {
	Schema    string `json:"schema"`
	Container string `json:"container,omitempty"`
	PID       int    `json:"pid"`
	Version   int    `json:"version"`
	Snapshots int    `json:"snapshots"`
	Absence   string `json:"absence,omitempty"`
}

// PredicateOf summarises o.
func PredicateOf(o *Observation) Predicate {
	p := Predicate{Schema: Schema, Container: o.Container, PID: o.Scope.PID, Version: o.Scope.Version, Snapshots: len(o.Snapshots)}
	if o.Absence != nil {
		p.Absence = o.Absence.String()
	}
	return p
}

// Sign signs every file of dir (ObservationFile and TableFile) with key.
func Sign(ctx context.Context, dir string, key ed25519.PrivateKey, o *Observation) error {
	_, err := attest.Sign(ctx, dir, key, PredicateType, PredicateOf(o))
	return err
}

// Verify verifies a signed observer directory against key and returns the
// observation.
func Verify(ctx context.Context, dir string, key ed25519.PublicKey) (*Observation, error) {
	var o Observation
	_, err := attest.Verify(ctx, dir, key, attest.Options{
		PredicateType: PredicateType,
		Required:      []string{ObservationFile},
		Schema: func(name string) func([]byte) error {
			if name != ObservationFile {
				return nil
			}
			return func(data []byte) error {
				if err := attest.StrictJSON(data, &o); err != nil {
					return err
				}
				if o.Schema != Schema {
					return fmt.Errorf("schema %q: want %q", o.Schema, Schema)
				}
				return nil
			}
		},
		Predicate: func(raw json.RawMessage, _ func(string) ([]byte, error)) error {
			var p Predicate
			if err := attest.StrictJSON(raw, &p); err != nil {
				return err
			}
			if p != PredicateOf(&o) {
				return fmt.Errorf("does not match %s", ObservationFile)
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	return &o, nil
}

func n(v *int64) string {
	if v == nil {
		return "max"
	}
	return strconv.FormatInt(*v, 10)
}

func count(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

// Table renders o: a header naming the scope, one row per snapshot and the
// final absence line.
func Table(w io.Writer, o *Observation) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "pid %d, cgroup v%d", o.Scope.PID, o.Scope.Version)
	if o.Container != "" {
		fmt.Fprintf(&buf, ", container %s", o.Container)
	}
	fmt.Fprintf(&buf, "\nscope: %s\n", o.Scope.Dirs["memory"])
	t := tablewriter.NewTable(&buf,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
	)
	t.Header([]string{"When", "Mem limit", "Mem+swap / swap", "Usage", "Failcnt/max ev", "OOM kills", "Pids cur/max", "Pids max ev", "CPU quota/period", "Procs"})
	for _, s := range o.Snapshots {
		fail := s.LimitHits()
		if err := t.Append([]string{
			s.Label, n(s.MemoryLimitBytes), n(s.MemorySwapLimitBytes), count(s.MemoryUsageBytes),
			count(&fail), count(s.OOMKills), count(s.PidsCurrent) + "/" + n(s.PidsMax), count(s.PidsMaxEvents),
			n(s.CPUQuotaMicros) + "/" + count(s.CPUPeriodMicros), strconv.Itoa(len(s.Procs)),
		}); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	if o.Absence != nil {
		fmt.Fprintf(&buf, "after cleanup: scope %s\n", o.Absence)
	}
	_, err := w.Write(buf.Bytes())
	return err
}
