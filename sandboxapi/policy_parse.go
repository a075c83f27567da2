package sandboxapi

import (
	"math"
	"slices"
)

// Issue paths are relative to the value being parsed or normalized:
// ParsePolicy and Policy.Normalize report "resources.memoryBytes", while
// ParseRequest and Request.Normalize report "policy.resources.memoryBytes".
// JSON parsers and Go methods report the same paths for the same problem.

// ParsePolicy decodes a JSON policy strictly (docs/contract.md#policy) and
// returns it normalized: an absent workspaceDiskQuota becomes not_requested and
// an absent execution becomes until_stopped. Unknown fields, wrong JSON kinds
// (null included), non-integers where integers are required, out-of-range values
// and duplicate keys are all reported in one *ValidationError whose issue paths
// are relative to the policy, e.g. "resources.memoryBytes".
func ParsePolicy(data []byte) (Policy, error) {
	var l issueList
	tree, ok := decodeTree(data, &l)
	if !ok {
		return Policy{}, l.err()
	}
	p := policyFromTree(node{l: &l, v: tree})
	return finishPolicy(&l, p, nil)
}

// ParseRequest decodes a JSON request {"policy": {...}} strictly
// (docs/contract.md#policy) and normalizes its policy as ParsePolicy does. Issue
// paths start with "policy.".
func ParseRequest(data []byte) (Request, error) {
	var l issueList
	tree, ok := decodeTree(data, &l)
	if !ok {
		return Request{}, l.err()
	}
	o := node{l: &l, v: tree}.object()
	o.only("policy")
	p := policyFromTree(o.field("policy"))
	p, err := finishPolicy(&l, p, []string{"policy"})
	if err != nil {
		return Request{}, err
	}
	return Request{Policy: p}, nil
}

func finishPolicy(structural *issueList, p Policy, path []string) (Policy, error) {
	var semantic issueList
	p = p.normalize(&semantic, path)
	structural.merge(&semantic)
	if err := structural.err(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// Normalize applies the contract's defaults to a Go-constructed policy (a zero
// WorkspaceDiskQuota.Kind becomes not_requested, a zero Execution.Kind
// becomes until_stopped) and checks every bound ParsePolicy checks. Issue
// paths are relative to the policy ("resources.memoryBytes"). The result
// shares no pointers with p.
func (p Policy) Normalize() (Policy, error) {
	var l issueList
	p = p.normalize(&l, nil)
	if err := l.err(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// Normalize normalizes r.Policy as Policy.Normalize does; issue paths start
// with "policy.".
func (r Request) Normalize() (Request, error) {
	var l issueList
	p := r.Policy.normalize(&l, []string{"policy"})
	if err := l.err(); err != nil {
		return Request{}, err
	}
	return Request{Policy: p}, nil
}

// normalize applies defaults, copies pointers and reports bound violations.
func (p Policy) normalize(l *issueList, path []string) Policy {
	if p.WorkspaceDiskQuota.Kind == "" {
		p.WorkspaceDiskQuota.Kind = QuotaNotRequested
	}
	if p.Execution.Kind == "" {
		p.Execution.Kind = ExecutionUntilStopped
	}
	p.Streams.MaxStdinBytes = clonePtr(p.Streams.MaxStdinBytes)
	p.Streams.MaxOutputBytes = clonePtr(p.Streams.MaxOutputBytes)

	p.Resources.check(l, at(path, "resources"))
	p.TemporaryStorage.check(l, at(path, "temporaryStorage"))
	p.Network.check(l, at(path, "network"))
	p.WorkspaceDiskQuota.check(l, at(path, "workspaceDiskQuota"))
	p.Execution.check(l, at(path, "execution"))
	p.Deadlines.check(l, at(path, "deadlines"))
	p.Transfers.check(l, at(path, "transfers"))
	p.Streams.check(l, at(path, "streams"))
	return p
}

func clonePtr(v *int64) *int64 {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}

// intRange reports v outside min..max and says whether it was inside.
func (l *issueList) intRange(path []string, v, min, max int64) bool {
	if v < min || v > max {
		l.add(path, "must be an integer from %d to %d, got %d", min, max, v)
		return false
	}
	return true
}

func (l *issueList) positive(path []string, v int64) bool {
	return l.intRange(path, v, 1, MaxSafeInteger)
}

func (r Resources) check(l *issueList, path []string) {
	if math.IsNaN(r.CPUs) || math.IsInf(r.CPUs, 0) || r.CPUs <= 0 {
		l.add(at(path, "cpus"), "must be a positive finite number")
	}
	l.positive(at(path, "memoryBytes"), r.MemoryBytes)
	l.positive(at(path, "pids"), r.PIDs)
}

func (t TemporaryStorage) check(l *issueList, path []string) {
	l.positive(at(path, "homeBytes"), t.HomeBytes)
	l.positive(at(path, "tempBytes"), t.TempBytes)
}

func (n Network) check(l *issueList, path []string) {
	if n.Kind != NetworkIsolated && n.Kind != NetworkOutbound {
		l.add(at(path, "kind"), "must be %q or %q", NetworkIsolated, NetworkOutbound)
	}
}

func (q WorkspaceDiskQuota) check(l *issueList, path []string) {
	switch q.Kind {
	case QuotaNotRequested:
		if q.Bytes != 0 {
			l.add(at(path, "bytes"), "only allowed when kind is %q", QuotaRequired)
		}
		if q.Accounting != "" {
			l.add(at(path, "accounting"), "only allowed when kind is %q", QuotaRequired)
		}
	case QuotaRequired:
		l.positive(at(path, "bytes"), q.Bytes)
		if q.Accounting != AccountingAllocatedBlocks {
			l.add(at(path, "accounting"), "must be %q", AccountingAllocatedBlocks)
		}
	default:
		l.add(at(path, "kind"), "must be %q or %q", QuotaNotRequested, QuotaRequired)
	}
}

func (e Execution) check(l *issueList, path []string) {
	switch e.Kind {
	case ExecutionUntilStopped:
		if e.TimeoutMs != 0 {
			l.add(at(path, "timeoutMs"), "only allowed when kind is %q", ExecutionDeadline)
		}
	case ExecutionDeadline:
		l.positive(at(path, "timeoutMs"), e.TimeoutMs)
	default:
		l.add(at(path, "kind"), "must be %q or %q", ExecutionUntilStopped, ExecutionDeadline)
	}
}

func (d Deadlines) check(l *issueList, path []string) {
	l.intRange(at(path, "startupMs"), d.StartupMs, 1, MaxStartupMs)
	l.intRange(at(path, "cleanupMs"), d.CleanupMs, 1, MaxCleanupMs)
}

func (t TransferBuffers) check(l *issueList, path []string) {
	l.intRange(at(path, "chunkBytes"), t.ChunkBytes, 512, MaxTransferChunkBytes)
	l.intRange(at(path, "metadataBatchBytes"), t.MetadataBatchBytes, MinMetadataBatchBytes, MaxMetadataBatchBytes)
	l.intRange(at(path, "metadataMergeFanIn"), t.MetadataMergeFanIn, 2, MaxMetadataMergeFanIn)
}

// check also enforces the contract's rule that the high-water mark fits
// within both buffer bounds; that issue is reported at highWaterMarkBytes.
func (s StreamLimits) check(l *issueList, path []string) {
	if s.MaxStdinBytes != nil {
		l.intRange(at(path, "maxStdinBytes"), *s.MaxStdinBytes, 0, MaxSafeInteger)
	}
	if s.MaxOutputBytes != nil {
		l.intRange(at(path, "maxOutputBytes"), *s.MaxOutputBytes, 0, MaxSafeInteger)
	}
	in := l.intRange(at(path, "maxBufferedInputBytes"), s.MaxBufferedInputBytes, 1, MaxBufferedInputBytes)
	out := l.intRange(at(path, "maxBufferedOutputBytes"), s.MaxBufferedOutputBytes, 1, MaxBufferedOutputBytes)
	hwm := l.intRange(at(path, "highWaterMarkBytes"), s.HighWaterMarkBytes, 1, MaxHighWaterMarkBytes)
	if in && out && hwm && (s.HighWaterMarkBytes > s.MaxBufferedInputBytes || s.HighWaterMarkBytes > s.MaxBufferedOutputBytes) {
		l.add(at(path, "highWaterMarkBytes"), "must fit within maxBufferedInputBytes and maxBufferedOutputBytes")
	}
}

// Validate checks a normalized StreamLimits as Policy.Normalize does; issue
// paths are relative to the limits ("highWaterMarkBytes").
func (s StreamLimits) Validate() error {
	var l issueList
	s.check(&l, nil)
	return l.err()
}

// policyFromTree reads a policy object, reporting structural issues.
func policyFromTree(n node) Policy {
	var p Policy
	o := n.object()
	o.only("resources", "temporaryStorage", "network", "workspaceDiskQuota", "execution", "deadlines", "transfers", "streams")
	p.Resources = resourcesFromTree(o.field("resources"))
	p.TemporaryStorage = temporaryStorageFromTree(o.field("temporaryStorage"))
	p.Network = networkFromTree(o.field("network"))

	if q, ok := o.optional("workspaceDiskQuota"); ok {
		p.WorkspaceDiskQuota = quotaFromTree(q)
	}
	if e, ok := o.optional("execution"); ok {
		qo := e.object()
		p.Execution.Kind = ExecutionKind(qo.field("kind").str())
		switch p.Execution.Kind {
		case ExecutionUntilStopped:
			qo.only("kind")
		case ExecutionDeadline:
			qo.only("kind", "timeoutMs")
			p.Execution.TimeoutMs = qo.field("timeoutMs").integer()
		}
		if qo.m != nil && p.Execution.Kind == "" {
			p.Execution.Kind = "(missing)" // keep Normalize from defaulting a present object
		}
	}

	do := o.field("deadlines").object()
	do.only("startupMs", "cleanupMs")
	p.Deadlines.StartupMs = do.field("startupMs").integer()
	p.Deadlines.CleanupMs = do.field("cleanupMs").integer()

	to := o.field("transfers").object()
	to.only("chunkBytes", "metadataBatchBytes", "metadataMergeFanIn")
	p.Transfers.ChunkBytes = to.field("chunkBytes").integer()
	p.Transfers.MetadataBatchBytes = to.field("metadataBatchBytes").integer()
	p.Transfers.MetadataMergeFanIn = to.field("metadataMergeFanIn").integer()

	so := o.field("streams").object()
	so.only("maxStdinBytes", "maxOutputBytes", "maxBufferedInputBytes", "maxBufferedOutputBytes", "highWaterMarkBytes")
	if v, ok := so.optional("maxStdinBytes"); ok {
		i := v.integer()
		p.Streams.MaxStdinBytes = &i
	}
	if v, ok := so.optional("maxOutputBytes"); ok {
		i := v.integer()
		p.Streams.MaxOutputBytes = &i
	}
	p.Streams.MaxBufferedInputBytes = so.field("maxBufferedInputBytes").integer()
	p.Streams.MaxBufferedOutputBytes = so.field("maxBufferedOutputBytes").integer()
	p.Streams.HighWaterMarkBytes = so.field("highWaterMarkBytes").integer()
	return p
}

func resourcesFromTree(n node) Resources {
	o := n.object()
	o.only("cpus", "memoryBytes", "pids")
	return Resources{
		CPUs:        o.field("cpus").number(),
		MemoryBytes: o.field("memoryBytes").integer(),
		PIDs:        o.field("pids").integer(),
	}
}

func temporaryStorageFromTree(n node) TemporaryStorage {
	o := n.object()
	o.only("homeBytes", "tempBytes")
	return TemporaryStorage{HomeBytes: o.field("homeBytes").integer(), TempBytes: o.field("tempBytes").integer()}
}

func networkFromTree(n node) Network {
	o := n.object()
	o.only("kind")
	return Network{Kind: NetworkKind(o.field("kind").str())}
}

func quotaFromTree(n node) WorkspaceDiskQuota {
	var q WorkspaceDiskQuota
	o := n.object()
	q.Kind = QuotaKind(o.field("kind").str())
	switch q.Kind {
	case QuotaNotRequested:
		o.only("kind")
	case QuotaRequired:
		o.only("kind", "bytes", "accounting")
		q.Bytes = o.field("bytes").integer()
		q.Accounting = o.field("accounting").str()
	}
	if o.m != nil && q.Kind == "" {
		q.Kind = "(missing)" // keep Normalize from defaulting a present object
	}
	return q
}

// Validate checks s against the contract's support shape: backendId and
// backendRevision are identities, networkModes holds one or two distinct
// network kinds, and the three unsupported capabilities are false. Issue
// paths are relative to s ("networkModes.1").
func (s Support) Validate() error {
	var l issueList
	l.identity([]string{"backendId"}, s.BackendID, MaxIdentityBytes)
	l.identity([]string{"backendRevision"}, s.BackendRevision, MaxIdentityBytes)
	if len(s.NetworkModes) < 1 || len(s.NetworkModes) > 2 {
		l.add([]string{"networkModes"}, "must list 1 or 2 network kinds")
	}
	for i, mode := range s.NetworkModes {
		path := []string{"networkModes", itoa(i)}
		switch {
		case mode != NetworkIsolated && mode != NetworkOutbound:
			l.add(path, "must be %q or %q", NetworkIsolated, NetworkOutbound)
		case slices.Contains(s.NetworkModes[:i], mode):
			l.add(path, "duplicate network kind %q", mode)
		}
	}
	for _, f := range []struct {
		name string
		v    bool
	}{{"workspaceDiskQuota", s.WorkspaceDiskQuota}, {"networkAllowlist", s.NetworkAllowlist}, {"independentProcessTermination", s.IndependentProcessTermination}} {
		if f.v {
			l.add([]string{f.name}, "must be false")
		}
	}
	return l.err()
}

// Validate checks e against the contract's effective-policy shape: an identity
// backendIdentity, isolation container or virtual_machine, resources,
// temporary storage and network within the policy bounds, nonRoot and
// readOnlyRoot true, and workspaceDiskQuota not_requested. Issue paths are
// relative to e ("resources.cpus").
func (e EffectivePolicy) Validate() error {
	var l issueList
	l.identity([]string{"backendIdentity"}, e.BackendIdentity, MaxIdentityBytes)
	if e.Isolation != IsolationContainer && e.Isolation != IsolationVirtualMachine {
		l.add([]string{"isolation"}, "must be %q or %q", IsolationContainer, IsolationVirtualMachine)
	}
	e.Resources.check(&l, []string{"resources"})
	e.TemporaryStorage.check(&l, []string{"temporaryStorage"})
	e.Network.check(&l, []string{"network"})
	if !e.NonRoot {
		l.add([]string{"nonRoot"}, "must be true")
	}
	if !e.ReadOnlyRoot {
		l.add([]string{"readOnlyRoot"}, "must be true")
	}
	if e.WorkspaceDiskQuota != (WorkspaceDiskQuota{Kind: QuotaNotRequested}) {
		l.add([]string{"workspaceDiskQuota"}, "must be {\"kind\":%q}", QuotaNotRequested)
	}
	return l.err()
}
