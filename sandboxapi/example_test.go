package sandboxapi

import (
	"context"
	"errors"
	"fmt"
)

func ExampleParsePolicy() {
	_, err := ParsePolicy([]byte(`{
	  "resources": {"cpus": 1, "memoryBytes": "512MiB", "pids": 256, "gpus": 1},
	  "temporaryStorage": {"homeBytes": 1048576, "tempBytes": 1048576},
	  "network": {"kind": "isolated"},
	  "deadlines": {"startupMs": 30000, "cleanupMs": 30000},
	  "transfers": {"chunkBytes": 65536, "metadataBatchBytes": 1048576, "metadataMergeFanIn": 16},
	  "streams": {"maxBufferedInputBytes": 1024, "maxBufferedOutputBytes": 1048576, "highWaterMarkBytes": 65536}
	}`))
	var verr *ValidationError
	if errors.As(err, &verr) {
		for _, issue := range verr.Issues {
			fmt.Printf("%s: %s\n", issue.PathString(), issue.Message)
		}
	}
	// Output:
	// resources.gpus: unknown field
	// resources.memoryBytes: expected integer, got string
	// streams.highWaterMarkBytes: must fit within maxBufferedInputBytes and maxBufferedOutputBytes
}

func ExampleWithSandbox() {
	backend := &fakeBackend{} // a fake; use a real driver's Backend
	req := Request{Policy: validPolicy()}
	workspace, err := WithSandbox(context.Background(), backend, req, InProcess(),
		func(ctx context.Context, sb Sandbox) (string, error) {
			return sb.Workspace(), nil
		})
	fmt.Println(workspace, err)
	fmt.Println(backend.Calls())
	// Output:
	// /workspace <nil>
	// [reserve start stop:sandbox destroy:sandbox]
}
