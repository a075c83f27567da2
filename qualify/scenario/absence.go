package scenario

import (
	"context"
	"fmt"

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

// CheckAbsent inspects res by exact reference and reports whether the
// Engine answered "not found". An identified resource is inspected by its
// ID; a creating one by its exact planned name (its create may have landed);
// a planned one was never created and is absent without an Engine call.
// Inspection is read-only: nothing is removed here.
func CheckAbsent(ctx context.Context, cli *client.Client, res evidence.Resource) (absent bool, probe string, err error) {
	ref := res.ID
	switch sandboxapi.IdentityKind(res.Identity) {
	case sandboxapi.IdentityPlanned:
		return true, "planned: never created", nil
	case sandboxapi.IdentityCreating:
		ref = res.Name
	}
	var what string
	switch sandboxapi.Role(res.Role) {
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
		return false, "", fmt.Errorf("unknown resource role %q", res.Role)
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
