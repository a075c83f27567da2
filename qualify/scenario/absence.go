package scenario

import (
	"context"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/sandboxapi"
)

// Resources lists the resources of owner's latest recovery record.
func Resources(owner sandboxapi.CleanupOwner) []evidence.Resource {
	rec := owner.RecoveryRecord()
	out := make([]evidence.Resource, 0, len(rec.Resources))
	for _, r := range rec.Resources {
		out = append(out, evidence.Resource{
			Sandbox: string(rec.SandboxID), Role: string(r.Role), Name: r.Name,
			Identity: string(r.Identity.Kind), ID: r.Identity.ID,
		})
	}
	return out
}

// CheckAbsent reports whether the Engine answers "not found" for res, by
// its exact planned name and, once identified, by its exact ID too: the
// evidence does not trust the driver's own record (a create wrongly taken
// for "never dispatched" would still be found by name). Inspection is
// read-only: nothing is removed here.
func CheckAbsent(ctx context.Context, cli *client.Client, res evidence.Resource) (absent bool, probe string, err error) {
	refs := []string{res.Name}
	if sandboxapi.IdentityKind(res.Identity) == sandboxapi.IdentityIdentified && res.ID != "" && res.ID != res.Name {
		refs = append(refs, res.ID)
	}
	var probes []string
	for _, ref := range refs {
		gone, p, err := inspectAbsent(ctx, cli, res.Role, ref)
		if err != nil {
			return false, "", err
		}
		probes = append(probes, p)
		if !gone {
			return false, strings.Join(probes, "; "), nil
		}
	}
	return true, strings.Join(probes, "; "), nil
}

func inspectAbsent(ctx context.Context, cli *client.Client, role, ref string) (bool, string, error) {
	var what string
	var err error
	switch sandboxapi.Role(role) {
	case sandboxapi.RoleCompute, sandboxapi.RoleExport:
		what = "container"
		_, err = cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
	case sandboxapi.RoleStorage:
		what = "volume"
		_, err = cli.VolumeInspect(ctx, ref, client.VolumeInspectOptions{})
	case sandboxapi.RoleNetwork:
		what = "network"
		_, err = cli.NetworkInspect(ctx, ref, client.NetworkInspectOptions{})
	default:
		return false, "", fmt.Errorf("unknown resource role %q", role)
	}
	switch {
	case err == nil:
		return false, fmt.Sprintf("inspect %s %s: present", what, ref), nil
	case cerrdefs.IsNotFound(err):
		return true, fmt.Sprintf("inspect %s %s: 404 not found", what, ref), nil
	default:
		return false, "", fmt.Errorf("inspect %s %s: %w", what, ref, err)
	}
}
