package evidence_test

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/golden"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// fixedRun is a run with every verdict kind and fixed times.
func fixedRun() (*evidence.Run, []*evidence.Scenario) {
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	failed := &evidence.Scenario{
		Index: 2, Name: "isolation", Failure: "",
		Checks: []evidence.Check{
			{Name: "uid", Want: "65534", Got: "65534", OK: true},
			{Name: "CapEff", Want: "0000000000000000", Got: "00000000a80425fb", OK: false},
		},
		CleanupErrors: []string{"destroy: volume in use"},
	}
	run := &evidence.Run{
		Schema: evidence.Schema, Profile: "linux-x64-cgroupv1", Endpoint: "unix:///var/run/docker.sock",
		Manifest:   evidence.Manifest{Path: "manifests/m.yaml", SHA256: "ab"},
		Controller: evidence.Controller{OS: "linux", Arch: "amd64", GoVersion: "go1.26.0"},
		Engine: driver.EngineFacts{DaemonID: "ABCD:EFGH", Version: "20.10.24", APIVersion: "1.41", MinAPIVersion: "1.12", GitCommit: "5d6db84",
			Os: "linux", Arch: "amd64", OSType: "linux", Architecture: "x86_64", KernelVersion: "6.1.0",
			OperatingSystem: "Debian GNU/Linux 12 (bookworm)", CgroupVersion: "1", CgroupDriver: "cgroupfs",
			SecurityOptions: []string{"name=seccomp,profile=default"},
			StorageDriver:   "overlay2", ContainerdCommit: "1.6.20", RuncCommit: "1.1.5"},
		Image: evidence.Image{ID: "sha256:" + string(bytes.Repeat([]byte("0"), 64)), Source: "build"},
		Scenarios: []evidence.ScenarioSummary{
			{Index: 1, Name: "admission", Dir: "01-admission", Verdict: evidence.Verdict{Kind: evidence.Passed}, Checks: 29, Passed: 29, DurationMs: 40},
			{Index: 2, Name: "isolation", Dir: "02-isolation", Verdict: evidence.Verdict{Kind: evidence.Failed}, Checks: 2, Passed: 1, DurationMs: 1830,
				Detail: "CapEff: want 0000000000000000, got 00000000a80425fb and a tail long enough to be cut short"},
			{Index: 3, Name: "lifecycle", Dir: "03-lifecycle", Verdict: evidence.Verdict{Kind: evidence.Skipped, Reason: "not run: interrupted"}},
			{Index: 4, Name: "outbound", Dir: "04-outbound", Verdict: evidence.Verdict{Kind: evidence.NotApplicable, Reason: "profile has no outbound network"}, DurationMs: 1},
		},
		Verdict: evidence.Verdict{Kind: evidence.Failed},
		Timing:  evidence.NewTiming(start, start.Add(2500*time.Millisecond)),
	}
	prof, err := profiles.Load(run.Profile)
	if err != nil {
		panic(err)
	}
	run.Admission = evidence.Admission{OK: true, Checks: driver.CheckEngineFacts(prof, run.Engine)}
	return run, []*evidence.Scenario{failed}
}

func TestTableGolden(t *testing.T) {
	run, _ := fixedRun()
	var buf bytes.Buffer
	assert.NilError(t, evidence.Table(&buf, run))
	golden.Assert(t, buf.String(), "table.golden")
}

func TestMarkdownGolden(t *testing.T) {
	run, _ := fixedRun()
	md, err := evidence.Markdown(run)
	assert.NilError(t, err)
	golden.Assert(t, string(md), "summary.md.golden")
}

func TestJUnitMapsVerdicts(t *testing.T) {
	run, scenarios := fixedRun()
	data, err := evidence.JUnit(run, scenarios)
	assert.NilError(t, err)
	golden.Assert(t, string(data), "junit.xml.golden")
	var doc struct {
		Suite struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Skipped  int `xml:"skipped,attr"`
			Errors   int `xml:"errors,attr"`
			Cases    []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	assert.NilError(t, xml.Unmarshal(data, &doc))
	assert.Equal(t, doc.Suite.Tests, 4)
	assert.Equal(t, doc.Suite.Failures, 1)
	assert.Equal(t, doc.Suite.Skipped, 2)
	assert.Equal(t, doc.Suite.Errors, 0)
	c := doc.Suite.Cases
	assert.Assert(t, c[0].Failure == nil && c[0].Skipped == nil)
	assert.Assert(t, c[1].Failure != nil)
	assert.Assert(t, c[2].Skipped != nil && c[3].Skipped != nil)
}

func TestWriteFileIsAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "evidence.json")
	assert.NilError(t, os.WriteFile(path, []byte("old"), 0o644))
	assert.NilError(t, evidence.WriteFile(path, []byte("new")))
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	assert.Equal(t, string(data), "new")
	entries, err := os.ReadDir(dir)
	assert.NilError(t, err)
	assert.Equal(t, len(entries), 1, "temporary file left behind: %v", entries)

	// A failed write leaves the previous content and no temporary file.
	err = evidence.WriteFile(filepath.Join(dir, "missing", "x.json"), []byte("x"))
	assert.Assert(t, err != nil)
	entries, _ = os.ReadDir(dir)
	assert.Equal(t, len(entries), 1)
}
