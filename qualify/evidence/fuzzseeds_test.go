package evidence_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// The seeds of FuzzVerifyRun and FuzzMerge must reach the end of
// verification, or fuzzing would only explore rejections.
func TestFuzzSeedsVerify(t *testing.T) {
	for _, edit := range []func(*evidence.Run){nil, func(r *evidence.Run) { r.Harness = harnessV2 }} {
		r, failed := fixedRun()
		r.Scenarios = r.Scenarios[:2]
		r.Scenarios[0] = evidence.ScenarioSummary{Index: 1, Name: "admission", Verdict: evidence.Verdict{Kind: evidence.Skipped, Reason: "not run: interrupted"}}
		r.Interrupted = true
		if edit != nil {
			edit(r)
		}
		dir, keys := t.TempDir(), t.TempDir()
		if _, _, err := attest.GenerateKey(keys); err != nil {
			t.Fatal(err)
		}
		writeReport(t, dir, keys, r, failed)
		if _, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys)); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFuzzSeed(t *testing.T, target, name string, values ...[]byte) {
	t.Helper()
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range values {
		fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
	}
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWriteFuzzSeeds regenerates the hostile seeds under testdata/fuzz when
// QUALBOX_WRITE_FUZZ_SEEDS=1; the real ones are read from a committed report.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("QUALBOX_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("set QUALBOX_WRITE_FUZZ_SEEDS=1 to regenerate testdata/fuzz")
	}
	real := filepath.Join("..", "..", "reports", "linux-x64-cgroupv1", "20261129T113142Z")
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(real, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	run, junit, summary := read("evidence.json"), read("junit.xml"), read("summary.md")
	v := "FuzzVerifyRun"
	writeFuzzSeed(t, v, "real-report", run, read("02-isolation/evidence.json"), junit, summary)
	sub := func(data []byte, old, new string) []byte { return []byte(strings.Replace(string(data), old, new, 1)) }
	writeFuzzSeed(t, v, "dir-dotdot", sub(run, `"dir": "02-isolation"`, `"dir": "../02-isolation"`), read("02-isolation/evidence.json"), junit, summary)
	writeFuzzSeed(t, v, "dir-absolute", sub(run, `"dir": "02-isolation"`, `"dir": "/etc"`), read("02-isolation/evidence.json"), junit, summary)
	writeFuzzSeed(t, v, "dir-nul", sub(run, `"dir": "02-isolation"`, `"dir": "02-isolation\u0000"`), read("02-isolation/evidence.json"), junit, summary)
	writeFuzzSeed(t, v, "duplicate-scenario", sub(run, `"name": "lifecycle"`, `"name": "isolation"`), read("02-isolation/evidence.json"), junit, summary)
	writeFuzzSeed(t, v, "verdict-flipped", sub(run, `"kind": "passed"`, `"kind": "failed"`), read("02-isolation/evidence.json"), junit, summary)
	deep := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)
	writeFuzzSeed(t, v, "deep-observed", run, sub(read("02-isolation/evidence.json"), `"observed": {`, `"observed": {"deep":`+deep+`,`), junit, summary)
	writeFuzzSeed(t, v, "many-values", sub(run, `"scenarios": [`, `"x":[`+strings.Repeat("0,", 250000)+`0], "scenarios": [`), nil, junit, summary)
	writeFuzzSeed(t, v, "junit-entities", run, nil, []byte(`<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><testsuites>&a;&a;</testsuites>`), summary)
	writeFuzzSeed(t, v, "not-json", []byte("\xff"), nil, nil, nil)
	writeFuzzSeed(t, v, "array", []byte(`[]`), []byte(`null`), []byte(`<testsuites/>`), []byte(`|`))

	m := "FuzzMerge"
	a := sub(run, `"schema": "qualbox.evidence.v1",`, `"schema": "qualbox.evidence.v1", "harness": {"module": "m", "version": "v", "vcsModified": false, "catalogueVersion": 2, "catalogueSha256": "`+strings.Repeat("c", 64)+`"},`)
	writeFuzzSeed(t, m, "real-no-harness", run, run)
	writeFuzzSeed(t, m, "real-with-harness", a, a)
	writeFuzzSeed(t, m, "other-lane", a, sub(a, `"version": "20.10.24+dfsg1"`, `"version": "2.0.0-beta.24"`))
	writeFuzzSeed(t, m, "huge-scenario-list", a, sub(a, `"scenarios": [`, `"scenarios": [`+strings.Repeat(`{"index":1,"name":"x","dir":"","verdict":{"kind":"skipped","reason":"r"},"checks":0,"checksPassed":0,"durationMs":0},`, 40)))
}
