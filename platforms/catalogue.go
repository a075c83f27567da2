package platforms

// Scenario is one entry of a manifest's scenario list: a scenario of the
// harness's catalogue (qualify/scenario) with its parameters.
type Scenario struct {
	// Name is the scenario's name, e.g. "memory-exhaustion".
	Name string
	// Note is a comment below the entry's name line, one line of text per
	// line.
	Note string
	// Params are the entry's parameters in the order they are written.
	Params []Param
}

// Param is one parameter of a manifest entry.
type Param struct {
	// Key is the parameter's name.
	Key string
	// YAML is its value as the manifest writes it: "128", "true",
	// "[round-trip, guest-symlink]". The scenario validates it when the
	// manifest is parsed (internal/platformgen parses every manifest it
	// generates).
	YAML string
	// Comment is a comment at the end of the parameter's line.
	Comment string
	// Note is a comment on the lines above the parameter, one line of
	// text per line.
	Note string
}

// Catalogue is every scenario a manifest may run, in run order, with the
// parameters and notes a manifest gives it unless an Override says
// otherwise. A new scenario of qualify/scenario is one entry here.
var Catalogue = []Scenario{
	// Its parameters name the profiles to refuse: every manifest gives
	// its own.
	{Name: "admission"},
	{Name: "isolation"},
	{Name: "lifecycle", Params: []Param{{Key: "exitCode", YAML: "7"}}},
	{Name: "memory-exhaustion", Params: []Param{
		{Key: "memoryBytes", YAML: "67108864", Comment: "64 MiB for this scenario; allocation goes to 2x"},
		{Key: "allocMiB", YAML: "128"},
	}},
	{Name: "pid-exhaustion", Params: []Param{{Key: "pids", YAML: "32"}, {Key: "spawn", YAML: "256"}}},
	{Name: "tmpfs-bounds"},
	{Name: "stream-limits"},
	{Name: "cancellation"},
	{Name: "descendant-containment"},
	{Name: "network-isolation"},
	{Name: "lost-engine-replies"},
	{Name: "exact-cleanup"},
	{Name: "unsupported-quota"},
	{Name: "transfer", Params: []Param{
		{Key: "cases", YAML: "[round-trip, guest-symlink, hostile-archives]"},
		{Key: "largeFileBytes", YAML: "200000", Comment: "> 3 transfer chunks of 64 KiB"},
		{Key: "hostile", YAML: "[dotdot, absolute, duplicate, file-as-directory, device-node, fifo, symlink, hardlink, truncated-body, bad-checksum, missing-end-blocks, gnu-sparse]"},
	}},
	{Name: "controller-death", Note: `Default: every checkpoint of reserve and start, after (N) and before
(N/before) its record is durable, plus exec.`},
	{Name: "datasets", Note: `A data-only image of the other architecture, shared by two sandboxes,
on the reference's own dataset tuple (cgroup v2, containerd image
store).`},
	{Name: "desktop-admission", Note: `Both Apple Silicon Desktop profiles against a synthetic Engine (no
Docker Desktop runs); any Linux host.`},
	// A pool per case (docs/qualification.md#warm-pool). Before
	// engine-restart, the one scenario that restarts the Engine.
	{Name: "warm-pool", Note: `A pool of 4 sandboxes per case (docs/qualification.md#warm-pool);
the expiry case's maxIdle is 5 s.`,
		Params: []Param{{Key: "size", YAML: "4"}, {Key: "idleMs", YAML: "5000"}}},
	// The restart command is the one of a guest or hosted runner's
	// systemd unit; lanes A and B give their own (docs/qualification.md#engine-restart).
	{Name: "engine-restart", Note: `The guest's (or hosted runner's) docker.service, as root; its
configuration has live-restore off, and no restart here turns it on.`,
		Params: []Param{{Key: "restart", YAML: "[systemctl, restart, docker]"}}},
}
