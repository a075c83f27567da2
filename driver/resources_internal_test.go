package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/sandboxapi"
)

// inspectFake returns an engine on a fake Engine that answers container and
// network inspects with the given JSON documents. It is a fake Engine: a
// real one never reports a short ID or lets a test inject daemon-wide
// network options here.
func inspectFake(t *testing.T, containerJSON, networkJSON string) *engine {
	t.Helper()
	sock := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(r.URL.Path, "/containers/"):
			w.Write([]byte(containerJSON))
		case strings.Contains(r.URL.Path, "/networks/"):
			w.Write([]byte(networkJSON))
		default:
			http.NotFound(w, r)
		}
	})
	eng, err := newEngine(sock, "1.41")
	assert.NilError(t, err)
	t.Cleanup(func() { eng.close() })
	return eng
}

var goodID = strings.Repeat("0123456789abcdef", 4)

func containerDoc(id string) string {
	return fmt.Sprintf(`{"Id":%q,"Name":"/c","Image":"sha256:x","Config":{"Image":"sha256:x"},"HostConfig":{}}`, id)
}

func networkDoc(id, options string) string {
	return fmt.Sprintf(`{"Id":%q,"Name":"n","Driver":"bridge","Scope":"local","Options":%s}`, id, options)
}

// Engine IDs are exactly 64 lowercase hex digits; anything else is not an
// Engine identity the record may hold (docs/contract.md#recovery).
func TestInspectRequiresExactEngineIDs(t *testing.T) {
	ctx := context.Background()
	for _, id := range []string{goodID[:63], strings.ToUpper(goodID), goodID + "0", "c1", goodID[:63] + "g"} {
		eng := inspectFake(t, containerDoc(id), networkDoc(id, "{}"))
		_, err := inspectResource(ctx, eng, sandboxapi.RoleCompute, "ref")
		assert.Check(t, is.ErrorContains(err, "64 lowercase hex"), "container ID %q", id)
		_, err = inspectResource(ctx, eng, sandboxapi.RoleNetwork, "ref")
		assert.Check(t, is.ErrorContains(err, "64 lowercase hex"), "network ID %q", id)
	}
	eng := inspectFake(t, containerDoc(goodID), networkDoc(goodID, "{}"))
	in, err := inspectResource(ctx, eng, sandboxapi.RoleCompute, "ref")
	assert.NilError(t, err)
	assert.Check(t, is.Equal(in.id, goodID))
	in, err = inspectResource(ctx, eng, sandboxapi.RoleNetwork, "ref")
	assert.NilError(t, err)
	assert.Check(t, is.Equal(in.id, goodID))
}

// A daemon's default network options (a bridge name, a gateway mode) are
// merged into every new network; the private bridge must carry none.
func TestNetworkReadbackRequiresEmptyOptions(t *testing.T) {
	eng := inspectFake(t, containerDoc(goodID), networkDoc(goodID, `{"com.docker.network.bridge.gateway_mode_ipv4":"routed"}`))
	in, err := inspectResource(context.Background(), eng, sandboxapi.RoleNetwork, "ref")
	assert.NilError(t, err, "cleanup still identifies the owned network")
	assert.Check(t, is.ErrorContains(checkRequested(sandboxapi.RoleNetwork, in), "gateway_mode_ipv4"))
	assert.Check(t, checkRequested(sandboxapi.RoleStorage, in))
}

// A container's fingerprint is the same whether the Engine reports its
// DNS lists as null (at create) or as [] (after a daemon restart, as
// Moby v2 and Debian's 20.10 both do), field by field; an entry in any of
// them is still a different container, and so is a change in a field the
// normalisation does not touch.
func TestFingerprintSurvivesRestartReserialisation(t *testing.T) {
	fp := func(hostConfig string) string {
		t.Helper()
		raw := `{"Id":"` + strings.Repeat("a", 64) + `","Name":"/c","Image":"sha256:` + strings.Repeat("b", 64) +
			`","Config":{"Image":"img","Cmd":["sleep"]},"HostConfig":` + hostConfig + `}`
		var c container.InspectResponse
		assert.NilError(t, json.Unmarshal([]byte(raw), &c))
		got, err := containerFingerprint(json.RawMessage(raw), c)
		assert.NilError(t, err)
		return got
	}
	created := fp(`{"Dns":null,"DnsOptions":null,"DnsSearch":null,"CapAdd":null}`)
	assert.Check(t, is.Equal(fp(`{"Dns":[],"DnsOptions":[],"DnsSearch":[],"CapAdd":null}`), created), "after a restart")
	assert.Check(t, is.Equal(fp(`{"CapAdd":null}`), created), "absent is null")
	for _, f := range fingerprintEmptyListIsNull {
		assert.Check(t, is.Equal(fp(`{"`+f+`":[],"CapAdd":null}`), created), "%s: [] is null", f)
		assert.Check(t, fp(`{"`+f+`":["1.1.1.1"],"CapAdd":null}`) != created, "%s: an entry is a difference", f)
	}
	assert.Check(t, fp(`{"CapAdd":[]}`) != created, "CapAdd is not normalised: [] and null stay distinct")
}

// Each field the normalisation touches, named here rather than read from
// the list, so that dropping one from it fails that field's case: null,
// [] and absent are one fingerprint in it alone (the others null), an
// entry is a difference and so is another entry. A field next to them
// that the Engine does not re-serialise keeps null and [] apart, in
// HostConfig and in Config.
func TestFingerprintNormalisesEachDNSField(t *testing.T) {
	fp := func(t *testing.T, config, hostConfig string) string {
		t.Helper()
		raw := `{"Id":"` + strings.Repeat("a", 64) + `","Name":"/c","Image":"sha256:` + strings.Repeat("b", 64) +
			`","Config":` + config + `,"HostConfig":` + hostConfig + `}`
		var c container.InspectResponse
		assert.NilError(t, json.Unmarshal([]byte(raw), &c))
		got, err := containerFingerprint(json.RawMessage(raw), c)
		assert.NilError(t, err)
		return got
	}
	cfg := `{"Image":"img","Cmd":["sleep"]}`
	// Two entries each field's type accepts (Dns holds IP addresses).
	entries := map[string][2]string{
		"Dns":        {`"192.0.2.53"`, `"192.0.2.54"`},
		"DnsOptions": {`"ndots:1"`, `"ndots:2"`},
		"DnsSearch":  {`"example.org"`, `"example.net"`},
	}
	fields := []string{"Dns", "DnsOptions", "DnsSearch"}
	assert.Check(t, is.DeepEqual(fingerprintEmptyListIsNull, fields), "a field added to the normalisation needs its case here")
	for _, f := range fields {
		t.Run(f, func(t *testing.T) {
			null := fp(t, cfg, `{"`+f+`":null}`)
			assert.Check(t, is.Equal(fp(t, cfg, `{"`+f+`":[]}`), null), "[] is null")
			assert.Check(t, is.Equal(fp(t, cfg, `{}`), null), "absent is null")
			entry := fp(t, cfg, `{"`+f+`":[`+entries[f][0]+`]}`)
			assert.Check(t, entry != null, "an entry is a difference")
			assert.Check(t, fp(t, cfg, `{"`+f+`":[`+entries[f][1]+`]}`) != entry, "another entry is a difference")
		})
	}
	for _, f := range []string{"CapAdd", "CapDrop", "SecurityOpt", "Binds", "ExtraHosts", "Links"} {
		assert.Check(t, fp(t, cfg, `{"`+f+`":[]}`) != fp(t, cfg, `{"`+f+`":null}`), "HostConfig.%s is not normalised", f)
	}
	assert.Check(t, fp(t, `{"Image":"img","Cmd":["sleep"],"Env":[]}`, `{}`) != fp(t, `{"Image":"img","Cmd":["sleep"],"Env":null}`, `{}`),
		"Config.Env is not normalised")
}
