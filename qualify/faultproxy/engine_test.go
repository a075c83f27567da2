package faultproxy_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/qualify/faultproxy"
)

func engineClient(t *testing.T, endpoint string) *client.Client {
	t.Helper()
	cli, err := client.New(client.WithHost(endpoint))
	assert.NilError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestRealEngine pings, imports an image (a chunked streaming body) and
// creates containers through the proxy, with one create's reply dropped.
func TestRealEngine(t *testing.T) {
	socket := testengine.Require(t)
	direct := engineClient(t, "unix://"+socket)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := direct.Ping(ctx, client.PingOptions{})
	assert.NilError(t, err)

	p := newProxy(t, socket,
		faultproxy.DropReply(faultproxy.Request("POST", "/containers/create").Nth(1)))
	cli := engineClient(t, p.Endpoint())
	_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	assert.NilError(t, err)

	imageID := importTinyImage(ctx, t, cli)
	t.Cleanup(func() {
		_, err := direct.ImageRemove(context.Background(), imageID, client.ImageRemoveOptions{})
		assert.Check(t, err)
	})

	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "qualbox-faultproxy-test-" + hex.EncodeToString(suffix[:])
	create := func(name string) (string, error) {
		out, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name: name, Config: &container.Config{Image: imageID, Cmd: []string{"/nothing"}},
			HostConfig: &container.HostConfig{NetworkMode: "none"},
		})
		return out.ID, err
	}
	_, err = create(name)
	assert.Assert(t, err != nil, "the create's reply was dropped")
	// The effect happened: the container exists under its exact name.
	in, err := direct.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	assert.NilError(t, err)
	lostID := in.Container.ID
	t.Cleanup(func() { removeContainer(t, direct, lostID) })

	id, err := create(name + "-2")
	assert.NilError(t, err)
	t.Cleanup(func() { removeContainer(t, direct, id) })

	// Removal through the proxy reaches the Engine and its reply comes back.
	_, err = cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	assert.NilError(t, err)
	_, err = direct.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	assert.Check(t, cerrdefs.IsNotFound(err), "%v", err)

	var creates []faultproxy.Exchange
	for _, e := range p.Seen() {
		if e.Method == "POST" && e.Path == "/containers/create" {
			creates = append(creates, e)
		}
	}
	assert.Assert(t, is.Len(creates, 2))
	assert.Check(t, is.Equal(creates[0].Action, faultproxy.ActionDropReply))
	assert.Check(t, is.Equal(creates[0].Status, 201))
	assert.Check(t, is.Equal(creates[1].Action, faultproxy.ActionForward))
}

func removeContainer(t *testing.T, cli *client.Client, id string) {
	t.Helper()
	_, err := cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		t.Errorf("remove container %s: %v", id, err)
	}
}

var imageIDPattern = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// importTinyImage imports a one-file image with random content (so its ID
// is this test's own) and returns its ID.
func importTinyImage(ctx context.Context, t *testing.T, cli *client.Client) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	content := make([]byte, 64)
	_, _ = rand.Read(content)
	assert.NilError(t, tw.WriteHeader(&tar.Header{Name: "nonce", Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}))
	_, err := tw.Write(content)
	assert.NilError(t, err)
	assert.NilError(t, tw.Close())
	pr, pw := io.Pipe()
	go func() { _, err := io.Copy(pw, &buf); pw.CloseWithError(err) }()
	resp, err := cli.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, "", client.ImageImportOptions{})
	assert.NilError(t, err)
	defer resp.Close()
	dec := json.NewDecoder(resp)
	id := ""
	for {
		var msg struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		err := dec.Decode(&msg)
		if errors.Is(err, io.EOF) {
			break
		}
		assert.NilError(t, err)
		assert.Assert(t, msg.Error == "", msg.Error)
		if imageIDPattern.MatchString(msg.Status) {
			id = msg.Status
		}
	}
	assert.Assert(t, id != "", "import returned no image ID")
	return id
}
