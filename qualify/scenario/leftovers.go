package scenario

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/moby/moby/client"
)

// NamespaceLabel is the label the driver puts on every container, volume
// and network of a sandbox, valued with the backend's namespace.
const NamespaceLabel = "dev.qualbox.sandbox.namespace"

// NamespaceLeftovers lists, read-only (Engine list calls with a label
// filter), every container (running or not), volume and network labelled
// NamespaceLabel=namespace, as "container <name> (<id>)", "volume <name>"
// and "network <name> (<id>)", sorted. It never removes anything: what it
// finds is reported, because cleanup is by exact ID only.
func NamespaceLeftovers(ctx context.Context, cli *client.Client, namespace string) ([]string, error) {
	label := NamespaceLabel + "=" + namespace
	var out []string
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", label)})
	if err != nil {
		return nil, fmt.Errorf("list containers labelled %s: %w", label, err)
	}
	for _, c := range cs.Items {
		name := strings.TrimPrefix(strings.Join(c.Names, ","), "/")
		out = append(out, fmt.Sprintf("container %s (%s)", name, c.ID))
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", label)})
	if err != nil {
		return nil, fmt.Errorf("list volumes labelled %s: %w", label, err)
	}
	for _, v := range vs.Items {
		out = append(out, "volume "+v.Name)
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", label)})
	if err != nil {
		return nil, fmt.Errorf("list networks labelled %s: %w", label, err)
	}
	for _, n := range ns.Items {
		out = append(out, fmt.Sprintf("network %s (%s)", n.Name, n.ID))
	}
	sort.Strings(out)
	return out, nil
}

// CheckNamespaceLeftovers records the check "no Engine object labelled
// with the scenario's namespace remains" from NamespaceLeftovers over
// env.Namespace, under a detached cleanup deadline. A list failure is a
// cleanup error. It covers what the driver's records may have missed; the
// runner's per-resource absence checks cover what they list.
func CheckNamespaceLeftovers(ctx context.Context, env *Env, rec *Record) {
	if env.Engine == nil {
		rec.CleanupError("namespace leftovers", fmt.Errorf("no Engine client to list objects labelled %s=%s", NamespaceLabel, env.Namespace))
		return
	}
	cctx, cancel := cleanupContext(ctx, env.Policy)
	defer cancel()
	left, err := NamespaceLeftovers(cctx, env.Engine, env.Namespace)
	if err != nil {
		rec.CleanupError("namespace leftovers", err)
		return
	}
	got := "none"
	if len(left) > 0 {
		got = strings.Join(left, ", ")
	}
	rec.Check(fmt.Sprintf("no container, volume or network labelled %s=%s remains", NamespaceLabel, env.Namespace), "none", got, len(left) == 0)
}

// leftoverChecked runs a scenario and then CheckNamespaceLeftovers, so
// every scenario of Default ends with the label check.
type leftoverChecked struct{ Scenario }

// Run runs the scenario, then checks its namespace for leftovers (also
// when the scenario failed: its cleanup ran before Run returned).
func (s leftoverChecked) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	err := s.Scenario.Run(ctx, env, params, rec)
	CheckNamespaceLeftovers(ctx, env, rec)
	return err
}

// Exclusive forwards the wrapped scenario's Exclusive, if any.
func (s leftoverChecked) Exclusive() string {
	if x, ok := s.Scenario.(Exclusive); ok {
		return x.Exclusive()
	}
	return ""
}
