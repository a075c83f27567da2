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
// marker file; the scenario kills it with SIGKILL there. With --pool N
// (the warm-pool scenario's death case) it fills a sandboxapi.Pool of N
// sandboxes instead, each one's records in its own file of the record
// directory, and blocks once the pool is full.

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
	// PoolSize, when positive (1..sandboxapi.MaxPoolSize), makes the child
	// fill a sandboxapi.Pool of that many sandboxes instead of starting
	// one: each pooled sandbox's records go to RecordDir/<sandbox ID>.json
	// (recordStore), and the child blocks once the pool is full, its
	// marker listing the pooled sandboxes' latest records. RecordFile and
	// Checkpoint are unused then.
	PoolSize int
	// RecordDir is the pool's record directory; it must exist.
	RecordDir string
}

// CheckpointPoolFull is the marker's checkpoint of a pool child: every
// pooled sandbox is started and idle.
const CheckpointPoolFull = "pool-full"

// ChildMarker is what the child writes to MarkerFile when it blocks.
type ChildMarker struct {
	Checkpoint string `json:"checkpoint"`
	// Persisted is the number of records persisted through
	// sandboxapi.Persisted so far.
	Persisted int `json:"persisted"`
	PID       int `json:"pid"`
	// Pooled are the latest records of a pool child's idle sandboxes,
	// oldest first, when it blocked: the child's own account of what it
	// started, independent of what the record directory kept.
	Pooled []sandboxapi.RecoveryRecord `json:"pooled,omitempty"`
}

// Args renders c as the subcommand's flags.
func (c ChildConfig) Args() ([]string, error) {
	policy, err := json.Marshal(c.Policy)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--profile", c.Profile, "--endpoint", c.Endpoint, "--image", c.ImageID, "--namespace", c.Namespace,
		"--uid", strconv.FormatUint(uint64(c.User.UID), 10), "--gid", strconv.FormatUint(uint64(c.User.GID), 10),
		"--policy", string(policy), "--spill", c.SpillDir, "--marker", c.MarkerFile,
	}
	if c.PoolSize > 0 {
		return append(args, "--records", c.RecordDir, "--pool", strconv.Itoa(c.PoolSize)), nil
	}
	return append(args, "--record", c.RecordFile, "--checkpoint", c.Checkpoint), nil
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
	fs.IntVar(&c.PoolSize, "pool", 0, "fill a pool of this many sandboxes instead (1..1024)")
	fs.StringVar(&c.RecordDir, "records", "", "record directory of a pool child")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	required := map[string]string{"profile": c.Profile, "endpoint": c.Endpoint, "image": c.ImageID, "namespace": c.Namespace,
		"policy": *policy, "spill": c.SpillDir, "marker": c.MarkerFile}
	pool := c.PoolSize != 0 || c.RecordDir != ""
	if pool {
		required["records"] = c.RecordDir
		if c.RecordFile != "" || c.Checkpoint != "" {
			return c, errors.New("--record and --checkpoint do not apply to a pool child (--pool)")
		}
		if c.PoolSize < 1 || c.PoolSize > sandboxapi.MaxPoolSize {
			return c, fmt.Errorf("--pool: want 1..%d, got %d", sandboxapi.MaxPoolSize, c.PoolSize)
		}
	} else {
		required["record"], required["checkpoint"] = c.RecordFile, c.Checkpoint
	}
	for name, v := range required {
		if v == "" {
			return c, fmt.Errorf("--%s is required", name)
		}
	}
	if *uid > 1<<32-1 || *gid > 1<<32-1 {
		return c, errors.New("--uid and --gid must fit 32 bits")
	}
	c.User = driver.User{UID: uint32(*uid), GID: uint32(*gid)}
	if !pool {
		if err := validCheckpoint(c.Checkpoint); err != nil {
			return c, fmt.Errorf("--checkpoint: %w", err)
		}
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
	if c.PoolSize > 0 {
		return runPoolChild(ctx, c, b)
	}
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

// runPoolChild fills a pool of c.PoolSize sandboxes on b, their records in
// c.RecordDir, and blocks once it is full after writing the marker with
// the pooled sandboxes' records. It returns only when the pool did not
// fill within the startup deadline plus 30 s, after closing it.
func runPoolChild(ctx context.Context, c ChildConfig, b *driver.Backend) error {
	store := &recordStore{dir: c.RecordDir}
	pool, err := sandboxapi.NewPool(b, sandboxapi.Request{Policy: c.Policy}, sandboxapi.PoolOptions{
		Size: c.PoolSize, MaxIdle: time.Hour, StartParallelism: c.PoolSize, RetryDelay: time.Second,
		Recovery: sandboxapi.Persisted(store.persist),
	})
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	deadline := time.Now().Add(sandboxapi.Milliseconds(c.Policy.Deadlines.StartupMs) + 30*time.Second)
	for len(pool.Idle()) < c.PoolSize {
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("the pool holds %d of %d sandboxes after the startup deadline plus 30 s", len(pool.Idle()), c.PoolSize),
				pool.Close(context.WithoutCancel(ctx)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	var pooled []sandboxapi.RecoveryRecord
	for _, id := range pool.Idle() {
		r, _ := store.latest(id)
		pooled = append(pooled, r)
	}
	m, err := json.Marshal(ChildMarker{Checkpoint: CheckpointPoolFull, Persisted: store.count(), PID: os.Getpid(), Pooled: pooled})
	if err == nil {
		err = publish(c.MarkerFile, m)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("marker: %w", err), pool.Close(context.WithoutCancel(ctx)))
	}
	for {
		time.Sleep(time.Hour)
	}
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
