package lanevm

import (
	"fmt"
	"strconv"
)

// GuestStatus is what the guest's job reported in state/job.status.
type GuestStatus int

const (
	// NoStatus: the guest reported nothing.
	NoStatus GuestStatus = iota
	// StatusPassed: every step of the job ran and passed.
	StatusPassed
	// StatusFailed: a step failed, or the guest's Engine never answered.
	StatusFailed
	// StatusStopped: the job was stopped by SIGTERM (a power-down) before
	// it finished; what it had was copied out.
	StatusStopped
)

var statusWords = map[string]GuestStatus{"passed\n": StatusPassed, "failed\n": StatusFailed, "stopped\n": StatusStopped}

func (s GuestStatus) String() string {
	switch s {
	case StatusPassed:
		return "passed"
	case StatusFailed:
		return "failed"
	case StatusStopped:
		return "stopped"
	}
	return "none"
}

// MaxStatusBytes bounds what is read of state/job.status: the longest
// valid content is 8 bytes.
const MaxStatusBytes = 64

// StatusError is a state/job.status whose content is none of the words
// the job writes. The content is the guest's, so it is kept as data.
type StatusError struct {
	// Content is what the file held, up to MaxStatusBytes.
	Content []byte
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("the guest's %s holds %s, not one line passed, failed or stopped", StatusFile, strconv.Quote(string(e.Content)))
}

// ParseStatus reads the content of state/job.status: exactly one of the
// lines "passed", "failed" or "stopped", each ended by a newline. Anything
// else, an empty file included, is a *StatusError.
func ParseStatus(content []byte) (GuestStatus, error) {
	if s, ok := statusWords[string(content)]; ok {
		return s, nil
	}
	if len(content) > MaxStatusBytes {
		content = content[:MaxStatusBytes]
	}
	return NoStatus, &StatusError{Content: append([]byte(nil), content...)}
}
