package driver

import (
	"errors"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver/archive"
	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
)

// inertBackend is a Backend that is never connected: Reserve and the
// transfer sorter need no Engine.
func inertBackend(t *testing.T) *Backend {
	t.Helper()
	b, err := New(Config{
		Profile: "linux-x64-cgroupv1", Endpoint: "unix:///nonexistent/engine.sock", Namespace: "inert",
		SpillDirectory: t.TempDir(), ImageID: "sha256:" + strings.Repeat("a", 64),
		User: User{UID: 65534, GID: 65534},
	})
	assert.NilError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// Every metadataBatchBytes the contract accepts gives a working transfer
// sorter: at the minimum, one batch holds the longest metadata record the
// driver can produce (a MaxPathBytes path whose every byte is escaped), and
// one byte below the minimum is refused at Reserve, naming the field,
// rather than failing every later import and export
// (docs/contract.md#policy).
func TestMetadataBatchMinimumIsTheDriversRecord(t *testing.T) {
	b := inertBackend(t)
	policy := enginetest.Policy()
	policy.Transfers.MetadataBatchBytes = sandboxapi.MinMetadataBatchBytes
	res, err := b.Reserve(sandboxapi.Request{Policy: policy}, sandboxapi.InProcess())
	assert.NilError(t, err)
	sorter, err := res.(*sandbox).newSorter()
	assert.NilError(t, err)
	defer sorter.Close()
	longest := archive.AppendRecord(nil, strings.Repeat("\x01", sandboxapi.MaxPathBytes), false, 1<<40)
	assert.Equal(t, len(longest), archive.MaxRecordBytes(sandboxapi.MaxPathBytes))
	assert.NilError(t, sorter.Add(longest))
	assert.NilError(t, sorter.Add(longest[:len(longest)-1]))
	var n int
	assert.NilError(t, sorter.Sorted(func([]byte) error { n++; return nil }))
	assert.Equal(t, n, 2)
	assert.Check(t, sorter.Runs() >= 1, "two longest records cannot share one minimum batch")

	for _, batch := range []int64{sandboxapi.MinMetadataBatchBytes - 1, 4101} {
		policy.Transfers.MetadataBatchBytes = batch
		_, err = b.Reserve(sandboxapi.Request{Policy: policy}, sandboxapi.InProcess())
		var ve *sandboxapi.ValidationError
		assert.Assert(t, errors.As(err, &ve), "batch %d: %v", batch, err)
		assert.Check(t, is.ErrorContains(err, "transfers.metadataBatchBytes"))
	}
}
