package sandboxapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

func ExamplePersistToFile() {
	dir, err := os.MkdirTemp("", "records")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "sandbox.json")
	// Hand the policy to Reserve or WithSandbox; the backend persists each
	// checkpoint through it, as this call does.
	policy := Persisted(PersistToFile(path))
	if err := policy.Persist(context.Background(), validRecord()); err != nil {
		panic(err)
	}
	// After a controller crash: read the last durable record back and give
	// it to the backend's Reconcile.
	rec, err := ReadRecoveryRecordFile(path)
	fmt.Println(rec.SandboxID, rec.Phase, err)
	// Output: sb-1 running <nil>
}
