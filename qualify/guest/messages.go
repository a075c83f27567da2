package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/moby/moby/api/types/jsonstream"
)

// maxMessageBytes bounds an Engine reply's JSON message stream: the
// replies read here (image load and import) are a few lines long.
const maxMessageBytes = 1 << 20

// EngineMessages decodes the JSON message stream of an Engine reply
// (POST /images/load, POST /images/create), at most 1 MiB of it, and calls
// each for every message in order. It returns the first error the Engine
// sent in the stream (errorDetail's message, else the older top-level
// "error") as an error with that text, a malformed stream as an error
// starting "reply: ", or each's own error.
func EngineMessages(body io.Reader, each func(jsonstream.Message) error) error {
	dec := json.NewDecoder(io.LimitReader(body, maxMessageBytes))
	for {
		var msg struct {
			jsonstream.Message
			// ErrorText is the top-level "error" some Engines still send
			// beside errorDetail.
			ErrorText string `json:"error"`
		}
		err := dec.Decode(&msg)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reply: %w", err)
		}
		if msg.Message.Error != nil && msg.Message.Error.Message != "" {
			return errors.New(msg.Message.Error.Message)
		}
		if msg.ErrorText != "" {
			return errors.New(msg.ErrorText)
		}
		if err := each(msg.Message); err != nil {
			return err
		}
	}
}
