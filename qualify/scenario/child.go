package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/sandboxapi"
)

// The child controller of the controller-death scenario is the qualify
// binary run as `qualify controller-child <ChildConfig.Args()>`, an
// internal subcommand. It reserves and starts one sandbox with
// sandboxapi.Persisted, writing every recovery record atomically to the
// record file, and blocks forever at its checkpoint after writing the
// marker file; the scenario kills it with SIGKILL there.

// ChildCommand is the subcommand of the qualify binary that runs RunChild.
const ChildCommand = "controller-child"

// QualifyBinaryEnv names the environment variable that points the
// controller-death scenario at the qualify binary to run as the child
// controller; unset, the scenario runs os.Executable() (the qualify binary
// itself under `qualify run`). Tests that run scenarios from a test binary
// build cmd/qualify and set it.
const QualifyBinaryEnv = "QUALBOX_QUALIFY_BINARY"

// CheckpointExec is the checkpoint after the sandbox's process started.
const CheckpointExec = "exec"

// ChildConfig is the child controller's manifest-derived configuration.
type ChildConfig struct {
	Profile, Endpoint, ImageID, Namespace string
	User                                  driver.User
	Policy                                sandboxapi.Policy
	// SpillDir is the child backend's spill directory.
	SpillDir string
	// RecordFile receives every recovery record, atomically replaced: first
	// the reservation record, then each persisted checkpoint.
	RecordFile string
	// MarkerFile is written (a ChildMarker as JSON) when the child blocks.
	MarkerFile string
	// Checkpoint is where the child blocks: "0" after the reservation
	// record, "N" after the N-th persisted record is durable and before the
	// effect it precedes, "N/before" in the N-th persist call before that
	// record is durable (record N-1 and its effect are done), or
	// CheckpointExec after `qualbox-probe sleep 1000` started as the
	// sandbox's process.
	Checkpoint string
}

// ChildMarker is what the child writes to MarkerFile when it blocks.
type ChildMarker struct {
	Checkpoint string `json:"checkpoint"`
	// Persisted is the number of records persisted through
	// sandboxapi.Persisted so far.
	Persisted int `json:"persisted"`
	PID       int `json:"pid"`
}

// Args renders c as the subcommand's flags.
func (c ChildConfig) Args() ([]string, error) {
	policy, err := json.Marshal(c.Policy)
	if err != nil {
		return nil, err
	}
	return []string{
		"--profile", c.Profile, "--endpoint", c.Endpoint, "--image", c.ImageID, "--namespace", c.Namespace,
		"--uid", strconv.FormatUint(uint64(c.User.UID), 10), "--gid", strconv.FormatUint(uint64(c.User.GID), 10),
		"--policy", string(policy), "--spill", c.SpillDir, "--record", c.RecordFile, "--marker", c.MarkerFile,
		"--checkpoint", c.Checkpoint,
	}, nil
}

// ParseChildArgs parses the subcommand's flags; every flag is required.
func ParseChildArgs(args []string, stderr io.Writer) (ChildConfig, error) {
	var c ChildConfig
	fs := flag.NewFlagSet("qualify "+ChildCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Profile, "profile", "", "platform profile")
	fs.StringVar(&c.Endpoint, "endpoint", "", "Engine socket, unix:///abs/path")
	fs.StringVar(&c.ImageID, "image", "", "exact guest image ID")
	fs.StringVar(&c.Namespace, "namespace", "", "sandbox namespace")
	uid := fs.Uint64("uid", 0, "workload uid")
	gid := fs.Uint64("gid", 0, "workload gid")
	policy := fs.String("policy", "", "sandbox policy as JSON")
	fs.StringVar(&c.SpillDir, "spill", "", "spill directory")
	fs.StringVar(&c.RecordFile, "record", "", "recovery record file")
	fs.StringVar(&c.MarkerFile, "marker", "", "marker file written when blocked")
	fs.StringVar(&c.Checkpoint, "checkpoint", "", `checkpoint index N (0 = reservation record) or "exec"`)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for name, v := range map[string]string{"profile": c.Profile, "endpoint": c.Endpoint, "image": c.ImageID, "namespace": c.Namespace,
		"policy": *policy, "spill": c.SpillDir, "record": c.RecordFile, "marker": c.MarkerFile, "checkpoint": c.Checkpoint} {
		if v == "" {
			return c, fmt.Errorf("--%s is required", name)
		}
	}
	if *uid > 1<<32-1 || *gid > 1<<32-1 {
		return c, errors.New("--uid and --gid must fit 32 bits")
	}
	c.User = driver.User{UID: uint32(*uid), GID: uint32(*gid)}
	if err := validCheckpoint(c.Checkpoint); err != nil {
		return c, fmt.Errorf("--checkpoint: %w", err)
	}
	p, err := sandboxapi.ParsePolicy([]byte(*policy))
	if err != nil {
		return c, fmt.Errorf("--policy: %w", err)
	}
	c.Policy = p
	return c, nil
}

// publish writes data to path through a rename in the same directory, so
// the polling parent reads the old content or the new, never a partial one.
func publish(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// RunChild is the child controller. It returns only on failure, or when
// the checkpoint was never reached (after destroying what it started);
// at its checkpoint it writes the marker and blocks until killed.
func RunChild(ctx context.Context, c ChildConfig) error {
	b, err := driver.New(driver.Config{
		Profile: c.Profile, Endpoint: c.Endpoint, Namespace: c.Namespace,
		SpillDirectory: c.SpillDir, ImageID: c.ImageID, User: c.User,
	})
	if err != nil {
		return err
	}
	defer b.Close()
	var mu sync.Mutex
	persisted, armed := 0, true // checkpoints are those of reserve and start
	block := func(n int) {
		m, _ := json.Marshal(ChildMarker{Checkpoint: c.Checkpoint, Persisted: n, PID: os.Getpid()})
		if err := publish(c.MarkerFile, m); err != nil {
			fmt.Fprintf(os.Stderr, "controller-child: marker: %v\n", err)
			os.Exit(1)
		}
		for {
			time.Sleep(time.Hour)
		}
	}
	toFile := sandboxapi.PersistToFile(c.RecordFile)
	persist := func(ctx context.Context, r sandboxapi.RecoveryRecord) error {
		mu.Lock()
		defer mu.Unlock()
		if armed && c.Checkpoint == strconv.Itoa(persisted+1)+"/before" {
			block(persisted)
		}
		if err := toFile(ctx, r); err != nil {
			return err
		}
		persisted++
		if armed && c.Checkpoint == strconv.Itoa(persisted) {
			block(persisted)
		}
		return nil
	}
	res, err := b.Reserve(sandboxapi.Request{Policy: c.Policy}, sandboxapi.Persisted(persist))
	if err != nil {
		return fmt.Errorf("reserve: %w", err)
	}
	if err := toFile(ctx, res.RecoveryRecord()); err != nil {
		return err
	}
	if c.Checkpoint == "0" {
		block(0)
	}
	sb, err := res.Start(ctx)
	mu.Lock()
	armed = false
	mu.Unlock()
	if err != nil {
		return errors.Join(fmt.Errorf("start: %w", err), res.Destroy(context.WithoutCancel(ctx)))
	}
	if c.Checkpoint == CheckpointExec {
		pr, err := sb.ReserveProcess(probeSpec("sleep", "1000"))
		if err == nil {
			_, err = pr.Start(ctx)
		}
		if err != nil {
			return errors.Join(fmt.Errorf("exec: %w", err), sb.Destroy(context.WithoutCancel(ctx)))
		}
		mu.Lock()
		n := persisted
		mu.Unlock()
		block(n)
	}
	mu.Lock()
	n := persisted
	mu.Unlock()
	return errors.Join(fmt.Errorf("checkpoint %s was never reached: starting persisted %d records", c.Checkpoint, n), sb.Destroy(context.WithoutCancel(ctx)))
}

// childProc is a running child controller: its combined output is kept
// (the first 64 KiB) and its end is delivered once on exited.
type childProc struct {
	cmd    *exec.Cmd
	out    boundedBuffer
	exited chan error
	reaped bool
}

// startChildProc runs bin's ChildCommand with cfg's flags; kill or reap
// must follow.
func startChildProc(bin string, cfg ChildConfig) (*childProc, error) {
	args, err := cfg.Args()
	if err != nil {
		return nil, err
	}
	c := &childProc{cmd: exec.Command(bin, append([]string{ChildCommand}, args...)...)}
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	// Wait also waits for the output copy, which only ends when every
	// holder of the pipe closes it; the child starts no processes, but a
	// bound costs nothing.
	c.cmd.WaitDelay = 10 * time.Second
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start child controller: %w", err)
	}
	c.exited = make(chan error, 1)
	go func() { c.exited <- c.cmd.Wait() }()
	return c, nil
}

// kill sends SIGKILL, unless the child already exited (its end was taken
// from exited), waits for it, and reports whether SIGKILL ended it.
func (c *childProc) kill(exitedEarly bool) bool {
	if !exitedEarly {
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.exited
	}
	c.reaped = true
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// reap kills and waits for a child that kill did not reap.
func (c *childProc) reap() {
	if !c.reaped {
		_ = c.cmd.Process.Kill()
		<-c.exited
		c.reaped = true
	}
}
