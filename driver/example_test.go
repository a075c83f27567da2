package driver_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/qualify/guest"
	"github.com/qualbox/qualbox/sandboxapi"
)

// The whole lifecycle of a sandbox against a real Engine, with exported
// names only: prepare an image, construct the backend, reserve with
// persisted recovery, start (admission, creation, read-back), import files,
// run the one process with its streams, stop, export, destroy. TestExample
// runs it against the Engine at $QUALBOX_ENGINE_SOCKET (default
// /var/run/docker.sock) and compares what it prints with exampleOutput; it
// has no Output comment because an example cannot skip where no Engine
// answers (docs/lanes.md#engine-tests). docs/contract.md describes each step.
func Example() {
	ctx := context.Background()
	socket := os.Getenv("QUALBOX_ENGINE_SOCKET")
	if socket == "" {
		socket = "/var/run/docker.sock"
	}
	endpoint := "unix://" + socket

	// The caller prepares the image; the driver never pulls or builds one.
	// Here: the project's guest image (static busybox and probe), removed
	// again by its exact ID at the end.
	eng, err := client.New(client.WithHost(endpoint))
	if err != nil {
		panic(err)
	}
	defer eng.Close()
	img, err := guest.Build(ctx, eng, guest.BuildOptions{})
	if err != nil {
		panic(err)
	}
	defer func() {
		if err := guest.Remove(context.WithoutCancel(ctx), eng, img.ID); err != nil {
			fmt.Println("remove image:", err)
		}
	}()

	work, err := os.MkdirTemp("", "qualbox-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(work)
	spill, in, out := filepath.Join(work, "spill"), filepath.Join(work, "in"), filepath.Join(work, "out")
	for _, d := range []string{spill, in} {
		if err := os.Mkdir(d, 0o700); err != nil {
			panic(err)
		}
	}
	if err := os.WriteFile(filepath.Join(in, "greeting.txt"), []byte("hello from the host\n"), 0o644); err != nil {
		panic(err)
	}

	// Construction and Reserve are inert: they check, nothing else.
	b, err := driver.New(driver.Config{
		Profile:        "linux-x64-cgroupv1",
		Endpoint:       endpoint,
		Namespace:      "qualbox-example",
		SpillDirectory: spill,
		ImageID:        img.ID,
		User:           driver.User{UID: 65534, GID: 65534},
	})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	req, err := sandboxapi.ParseRequest([]byte(`{"policy": {
	  "resources": {"cpus": 0.5, "memoryBytes": 67108864, "pids": 64},
	  "temporaryStorage": {"homeBytes": 8388608, "tempBytes": 8388608},
	  "network": {"kind": "isolated"},
	  "deadlines": {"startupMs": 60000, "cleanupMs": 60000},
	  "transfers": {"chunkBytes": 65536, "metadataBatchBytes": 1048576, "metadataMergeFanIn": 16},
	  "streams": {"maxBufferedInputBytes": 65536, "maxBufferedOutputBytes": 65536, "highWaterMarkBytes": 16384}
	}}`))
	if err != nil {
		panic(err)
	}
	// Every checkpoint is durable in record.json before the effect it
	// precedes; after a crash, Backend.Reconcile takes it from there.
	record := filepath.Join(work, "record.json")
	res, err := b.Reserve(req, sandboxapi.Persisted(sandboxapi.PersistToFile(record)))
	if err != nil {
		panic(err)
	}
	// The reservation owns whatever Start acquires: destroy it whatever
	// happens (Destroy is retryable and a no-op once everything is gone).
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := res.Destroy(cctx); err != nil {
			fmt.Println("destroy:", err)
		}
	}()

	// Start admits the profile, creates the resources and reads them back.
	sb, err := res.Start(ctx)
	if err != nil {
		panic(err)
	}
	files := sb.(sandboxapi.Transferer)
	if err := files.ImportTree(ctx, sandboxapi.DirSource(in), sandboxapi.TransferOptions{}); err != nil {
		panic(err)
	}

	// The sandbox's one process: literal arguments, no shell unless asked.
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{
		Executable: "/bin/sh",
		Args:       []string{"-c", `cat greeting.txt; read line; echo "stdin: $line"; echo done > result.txt; exit 3`},
		Cwd:        sb.Workspace(),
	})
	if err != nil {
		panic(err)
	}
	p, err := pr.Start(ctx)
	if err != nil {
		panic(err)
	}
	if _, err := io.WriteString(p.Stdin(), "from the controller\n"); err != nil {
		panic(err)
	}
	p.Stdin().Close() // half-close: the guest reads EOF after this line
	stdout, err := io.ReadAll(p.Stdout())
	if err != nil {
		panic(err)
	}
	stderr, err := io.ReadAll(p.Stderr())
	if err != nil {
		panic(err)
	}
	exit, err := p.Wait(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Print(string(stdout))
	fmt.Printf("stderr: %q\n", stderr)
	fmt.Println(exit)

	// Stop removes compute and keeps the files; export reads them through
	// the never-started accessor and validates the archive as it streams.
	if err := sb.Stop(ctx); err != nil {
		panic(err)
	}
	if err := files.ExportTree(ctx, sandboxapi.File("result.txt"), sandboxapi.DirSink(out), sandboxapi.TransferOptions{}); err != nil {
		panic(err)
	}
	result, err := os.ReadFile(filepath.Join(out, "result.txt"))
	if err != nil {
		panic(err)
	}
	fmt.Print("exported: ", string(result))

	// Destroy removes accessor, volume and network by exact ID.
	if err := sb.Destroy(ctx); err != nil {
		panic(err)
	}
	fmt.Println("phase:", sb.RecoveryRecord().Phase)
}

// exampleOutput is what Example prints.
const exampleOutput = `hello from the host
stdin: from the controller
stderr: ""
exited with code 3
exported: done
phase: destroyed
`

// TestExample runs Example against the test Engine, skipping or failing
// where none answers (testengine.Require), and compares its output.
func TestExample(t *testing.T) {
	t.Setenv("QUALBOX_ENGINE_SOCKET", testengine.Require(t))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	func() {
		defer func() {
			os.Stdout = stdout
			w.Close()
		}()
		Example()
	}()
	if out := <-got; out != exampleOutput {
		t.Errorf("Example printed\n%s\nwant\n%s", out, exampleOutput)
	}
}
