package guest

import (
	"strings"
	"testing"

	"github.com/moby/moby/api/types/jsonstream"
	"gotest.tools/v3/assert"
)

// EngineMessages hands every message over in order and stops at the
// first error the Engine sent, in either spelling, or at a broken stream.
func TestEngineMessages(t *testing.T) {
	var seen []string
	err := EngineMessages(strings.NewReader(`{"stream":"a"}{"status":"b"}`), func(m jsonstream.Message) error {
		seen = append(seen, m.Stream+m.Status)
		return nil
	})
	assert.NilError(t, err)
	assert.DeepEqual(t, seen, []string{"a", "b"})
	for body, want := range map[string]string{
		`{"stream":"a"}{"errorDetail":{"message":"no space left"},"error":"no space left (old)"}`: "no space left",
		`{"error":"invalid tar header"}`: "invalid tar header",
		`{"stream":"a"}{"str`:            "reply: unexpected EOF",
	} {
		err := EngineMessages(strings.NewReader(body), func(jsonstream.Message) error { return nil })
		assert.Error(t, err, want, body)
	}
}
