package driver_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/driver/internal/enginetest"
)

// importImage imports a one-file image with the given Dockerfile-style
// changes and registers its removal by exact ID.
func importImage(t *testing.T, changes ...string) string {
	t.Helper()
	cli := enginetest.Client(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	assert.NilError(t, tw.WriteHeader(&tar.Header{Name: "marker", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg}))
	_, err := tw.Write([]byte("x\n"))
	assert.NilError(t, err)
	assert.NilError(t, tw.Close())
	rc, err := cli.ImageImport(context.Background(), client.ImageImportSource{Source: &buf, SourceName: "-"}, "", client.ImageImportOptions{Changes: changes})
	assert.NilError(t, err)
	defer rc.Close()
	var id string
	dec := json.NewDecoder(rc)
	for {
		var msg struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			break
		} else {
			assert.NilError(t, err)
		}
		assert.Equal(t, msg.Error, "")
		if msg.Status != "" {
			id = msg.Status
		}
	}
	t.Cleanup(func() {
		_, err := cli.ImageRemove(context.Background(), id, client.ImageRemoveOptions{PruneChildren: false})
		assert.Check(t, err)
	})
	return id
}

func TestAdmissionRejectsImageEnvironmentAndVolumes(t *testing.T) {
	for _, tc := range []struct {
		name, check string
		changes     []string
	}{
		{"extra env", "image Env", []string{"ENV NODE_VERSION=24"}},
		{"different PATH", "image Env", []string{"ENV PATH=/opt/bin"}},
		{"declared volume", "image Volumes", []string{"VOLUME /data"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := importImage(t, tc.changes...)
			b := newBackend(t, func(c *driver.Config) { c.ImageID = id })
			_, err := b.Admit(context.Background())
			var ae *driver.AdmissionError
			assert.Assert(t, errors.As(err, &ae), "got %v", err)
			assert.Equal(t, len(ae.Failed), 1, "%v", ae.Failed)
			assert.Equal(t, ae.Failed[0].Name, tc.check)
		})
	}
	t.Run("subset of the fixed environment", func(t *testing.T) {
		id := importImage(t, "ENV HOME=/home/sandbox")
		b := newBackend(t, func(c *driver.Config) { c.ImageID = id })
		_, err := b.Admit(context.Background())
		assert.NilError(t, err)
	})
	t.Run("absent image", func(t *testing.T) {
		b := newBackend(t, func(c *driver.Config) {
			c.ImageID = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		})
		_, err := b.Admit(context.Background())
		assert.ErrorContains(t, err, "absent")
	})
}
