package main

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/termprogress"
)

// --progress auto (the default) is the plain lines when stderr is not a
// terminal (a buffer, a pipe), even where TERM names a capable terminal
// outside CI; tty and plain are what they say.
func TestProgressModeOfStderr(t *testing.T) {
	t.Setenv("TERM", "xterm-256color")
	t.Setenv("CI", "")
	r, w, err := os.Pipe()
	assert.NilError(t, err)
	defer r.Close()
	defer w.Close()
	for _, tc := range []struct {
		flag string
		want termprogress.Mode
	}{
		{"auto", termprogress.Plain},
		{"plain", termprogress.Plain},
		{"tty", termprogress.TTY},
	} {
		o := runOptions{manifest: "m.yaml", repeat: 1, parallel: 1, scenarioTimeout: 1e9, progress: tc.flag}
		assert.NilError(t, o.Validate())
		assert.Check(t, is.Equal(o.progressMode(&bytes.Buffer{}), tc.want), "--progress %s on a buffer", tc.flag)
		assert.Check(t, is.Equal(o.progressMode(w), tc.want), "--progress %s on a pipe", tc.flag)
	}
	// The flag's default is auto.
	var o runOptions
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	o.AddFlags(fs)
	assert.NilError(t, fs.Parse(nil))
	assert.Check(t, is.Equal(o.progress, "auto"))
}
