package enginepin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/syntheticengine"
)

// engine serves the synthetic Engine's Desktop shape with /_ping and
// /version reporting API served.
func engine(t *testing.T, served string) *syntheticengine.Server {
	t.Helper()
	// A short directory: a Unix socket path is at most 108 bytes.
	dir, err := os.MkdirTemp("", "qb-pin")
	assert.NilError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	shape := syntheticengine.Desktop().Clone()
	shape.Version.APIVersion = served
	srv, err := syntheticengine.Start(dir, shape)
	assert.NilError(t, err)
	t.Cleanup(func() { assert.Check(t, srv.Close()) })
	return srv
}

// Without a profile pin, the client pins the newest profile pin (the
// embedded profiles' daemon.minAPIVersion is 1.41 or 1.52) at most the API version the
// Engine's /_ping reports, never the Engine's own; only /_ping, which is
// unversioned, goes out before the choice, and every later request
// carries the pin.
func TestConnectPinsTheNewestProfilePinServed(t *testing.T) {
	for served, want := range map[string]string{"1.41": "1.41", "1.45": "1.41", "1.51": "1.41", "1.52": "1.52", "1.56": "1.52"} {
		srv := engine(t, served)
		cli, got, err := Connect(context.Background(), srv.Endpoint(), "qualbox-test", "")
		assert.NilError(t, err, served)
		assert.Check(t, is.Equal(got, served))
		assert.Check(t, is.Equal(cli.ClientVersion(), want), "Engine API %s", served)
		for _, r := range srv.Requests() {
			assert.Check(t, strings.HasSuffix(r, " /_ping"), "before the first versioned request: %s", r)
		}
		srv.ResetRequests()
		_, err = cli.ServerVersion(context.Background(), client.ServerVersionOptions{})
		assert.Check(t, err)
		assert.Check(t, is.DeepEqual(srv.Requests(), []string{"GET /v" + want + "/version"}), "Engine API %s", served)
		assert.Check(t, cli.Close())
	}
}

// A profile pin is kept whatever the Engine reports: Connect does not
// check it is served, the caller's first versioned request does.
func TestConnectKeepsTheProfilePin(t *testing.T) {
	srv := engine(t, "1.52")
	cli, served, err := Connect(context.Background(), srv.Endpoint(), "qualbox-test", "1.41")
	assert.NilError(t, err)
	defer cli.Close()
	assert.Check(t, is.Equal(served, "1.52"))
	assert.Check(t, is.Equal(cli.ClientVersion(), "1.41"))
}

// An Engine whose API version reaches no profile pin is refused without
// a client, with an *UnservedError naming the endpoint and the version.
func TestConnectRefusesAnEngineBelowEveryPin(t *testing.T) {
	for served, want := range map[string]string{
		"1.40": "reports API 1.40, older than every profile's daemon.minAPIVersion",
		"":     `reports API "", not an API version 1.<minor>`,
		"2.0":  `reports API "2.0", not an API version 1.<minor>`,
	} {
		srv := engine(t, served)
		cli, got, err := Connect(context.Background(), srv.Endpoint(), "qualbox-test", "")
		assert.Check(t, cli == nil)
		assert.Check(t, is.Equal(got, served))
		var unserved *UnservedError
		assert.Assert(t, errors.As(err, &unserved), "%v", err)
		assert.Check(t, is.DeepEqual(*unserved, UnservedError{Endpoint: srv.Endpoint(), Served: served}))
		assert.Check(t, is.Equal(err.Error(), "the Engine at "+srv.Endpoint()+" "+want))
		// With a profile pin the same Engine is connected: the pin is the
		// caller's to check.
		cli, _, err = Connect(context.Background(), srv.Endpoint(), "qualbox-test", "1.41")
		assert.Check(t, err)
		if cli != nil {
			assert.Check(t, cli.Close())
		}
	}
}

// Where nothing answers, or the context ends first, the error is a
// *NoEngineError: one line naming the endpoint and the innermost cause.
func TestConnectNoEngine(t *testing.T) {
	endpoint := "unix://" + filepath.Join(t.TempDir(), "nothing.sock")
	cli, _, err := Connect(context.Background(), endpoint, "qualbox-test", "")
	assert.Check(t, cli == nil)
	var none *NoEngineError
	assert.Assert(t, errors.As(err, &none), "%v", err)
	assert.Check(t, is.Equal(none.Endpoint, endpoint))
	assert.Check(t, strings.HasPrefix(err.Error(), "no Docker Engine answers at "+endpoint+" ("), err.Error())
	assert.Check(t, is.Contains(err.Error(), "no such file or directory"))
	assert.Check(t, !strings.ContainsAny(err.Error(), "\r\n"), err.Error())

	srv := engine(t, "1.52")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = Connect(ctx, srv.Endpoint(), "qualbox-test", "")
	assert.Assert(t, errors.As(err, &none), "%v", err)
	assert.Check(t, errors.Is(err, context.Canceled), "%v", err)
}

// A client that cannot be built (an endpoint or pin the Engine client
// rejects) is a *ClientError, before anything is sent.
func TestConnectBadClient(t *testing.T) {
	srv := engine(t, "1.52")
	for _, tc := range []struct{ endpoint, pin, want string }{
		{"nonsense", "", "engine endpoint nonsense: "},
		{srv.Endpoint(), "one.41", "engine endpoint " + srv.Endpoint() + ": invalid API version (one.41)"},
	} {
		cli, _, err := Connect(context.Background(), tc.endpoint, "qualbox-test", tc.pin)
		assert.Check(t, cli == nil)
		var bad *ClientError
		assert.Check(t, errors.As(err, &bad), "%v", err)
		assert.Check(t, is.ErrorContains(err, tc.want))
	}
	assert.Check(t, is.Len(srv.Requests(), 0))
}

func TestOneLine(t *testing.T) {
	assert.Check(t, is.Equal(oneLine("a\nb"), "a"))
	assert.Check(t, is.Equal(oneLine("a\r\nb"), "a"))
	assert.Check(t, is.Equal(oneLine("a"), "a"))
}
