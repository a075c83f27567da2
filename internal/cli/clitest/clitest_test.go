package clitest_test

import (
	"bytes"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/cli"
	"github.com/qualbox/qualbox/internal/cli/clitest"
)

func help(t *testing.T, synopsis string, define func(c *cli.Command)) string {
	t.Helper()
	c := cli.New("tool sub", synopsis, "Do a thing.")
	define(c)
	var stdout, stderr bytes.Buffer
	code, done := c.Parse([]string{"--help"}, &stdout, &stderr)
	assert.Equal(t, code, 0)
	assert.Assert(t, done)
	assert.Equal(t, stderr.String(), "")
	return stdout.String()
}

// A help that keeps the conventions passes.
func TestCheckHelpAcceptsConventionalHelp(t *testing.T) {
	h := help(t, "--out DIR [--json]", func(c *cli.Command) {
		c.Flags.String("out", "", "output `DIR`")
		c.Flags.Bool("json", false, "print JSON")
	})
	assert.Check(t, is.Len(clitest.CheckHelp(h), 0), h)
}

// The misparse the check exists for: a bool flag whose usage quotes
// `image: build` gets "image: build" as its value name.
func TestCheckHelpCatchesBackquoteMisparse(t *testing.T) {
	h := help(t, "[--keep-image]", func(c *cli.Command) {
		c.Flags.Bool("keep-image", false, "keep the guest image built for `image: build`")
	})
	assert.Check(t, is.Contains(h, "--keep-image image: build"))
	assert.DeepEqual(t, clitest.CheckHelp(h), []string{
		`flag line "  --keep-image image: build" is not --name or --name VALUE`,
		"usage line says --keep-image , the flag list --keep-image image: build",
	})
}

func TestCheckHelpCatchesMismatchesAndOneDash(t *testing.T) {
	h := help(t, "--out FILE [--verbose]", func(c *cli.Command) {
		c.Flags.String("out", "", "output `DIR`; see -json")
		c.Flags.Bool("json", false, "print JSON, `A` quoted twice: `B`")
	})
	got := clitest.CheckHelp(h)
	for _, want := range []string{
		"backquote in help text",
		`long flag with one dash: "-json"`,
		"usage line says --out FILE, the flag list --out DIR",
		"usage line names --verbose, which is not a listed flag",
	} {
		assert.Check(t, is.Contains(got, want), "%q", got)
	}
}
