package lanevm

import (
	"path"
	"strings"
)

// requirement is one thing a job that passed has left in the shared
// folder (scripts/lanec-job.sh): a regular file, holding exactly holds
// when that is not empty, or a directory.
type requirement struct {
	// rel is its path under the shared folder.
	rel   string
	dir   bool
	holds string
}

func (q requirement) String() string {
	switch {
	case q.dir:
		return q.rel + " (a directory)"
	case q.holds != "":
		return q.rel + " holding " + strings.TrimSuffix(q.holds, "\n")
	}
	return q.rel + " (a regular file)"
}

// requirements lists what a passed job leaves, given the inputs the host
// put in the shared folder before the guest booted (so the guest cannot
// lower the bar by removing them): every phase's mark; with
// manifest.yaml, qualify's exit status 0 and the report's signed
// envelope; with params/conformance-profile, the suite's exit status 0;
// with record.sh, the recorded trees and their log.
func requirements(share *shareFS, phases []Phase) []requirement {
	var reqs []requirement
	for _, p := range phases {
		if p.Mark != StatusFile {
			reqs = append(reqs, requirement{rel: path.Join("state", p.Mark)})
		}
	}
	if share.isFile("manifest.yaml") {
		reqs = append(reqs,
			requirement{rel: "state/qualify.rc", holds: "0\n"},
			requirement{rel: "out/report/evidence.dsse.json"})
	}
	if share.isFile("params/conformance-profile") {
		reqs = append(reqs, requirement{rel: "state/conformance.rc", holds: "0\n"})
	}
	if share.isFile("record.sh") {
		reqs = append(reqs, requirement{rel: "out/record", dir: true}, requirement{rel: "state/record.log"})
	}
	return reqs
}

// missing returns, in order, the requirements the shared folder does not
// meet; an entry of the wrong type (a symlink in place of the envelope)
// does not meet its requirement.
func (s *shareFS) missing(reqs []requirement) []string {
	var out []string
	for _, q := range reqs {
		ok := false
		switch {
		case q.dir:
			ok = s.isDir(q.rel)
		case q.holds != "":
			data, err := s.readHead(q.rel, int64(len(q.holds))+1)
			ok = err == nil && string(data) == q.holds
		default:
			ok = s.isFile(q.rel)
		}
		if !ok {
			out = append(out, q.String())
		}
	}
	return out
}
