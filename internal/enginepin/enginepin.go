package enginepin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/profiles"
)

// PingTimeout bounds the one /_ping Connect sends.
const PingTimeout = 10 * time.Second

// ClientError is returned when no Engine client can be built for Endpoint
// (Endpoint is not a URL the client accepts, or the pin is not an API
// version); nothing was sent.
type ClientError struct {
	Endpoint string
	Err      error
}

func (e *ClientError) Error() string { return fmt.Sprintf("engine endpoint %s: %v", e.Endpoint, e.Err) }

func (e *ClientError) Unwrap() error { return e.Err }

// NoEngineError is returned when nothing answers /_ping at Endpoint
// within PingTimeout or before the caller's context ends. Err is the
// client's error, whose innermost cause (for example "connect: no such
// file or directory") the message shows on one line.
type NoEngineError struct {
	Endpoint string
	Err      error
}

func (e *NoEngineError) Error() string {
	cause := e.Err.Error()
	var op interface{ Unwrap() error }
	if errors.As(e.Err, &op) && op.Unwrap() != nil {
		cause = op.Unwrap().Error()
	}
	return fmt.Sprintf("no Docker Engine answers at %s (%s)", e.Endpoint, oneLine(cause))
}

func (e *NoEngineError) Unwrap() error { return e.Err }

// UnservedError is returned, for a connection without a profile pin, when
// the API version the Engine at Endpoint reports (Served, its /_ping
// API-Version) reaches no profile pin: it is not 1.<minor>, or it is
// older than every profile's daemon.minAPIVersion.
type UnservedError struct {
	Endpoint string
	Served   string
}

func (e *UnservedError) Error() string {
	minor, ok := strings.CutPrefix(e.Served, "1.")
	if n, err := strconv.Atoi(minor); !ok || err != nil || n < 0 {
		return fmt.Sprintf("the Engine at %s reports API %q, not an API version 1.<minor>", e.Endpoint, e.Served)
	}
	return fmt.Sprintf("the Engine at %s reports API %s, older than every profile's daemon.minAPIVersion", e.Endpoint, e.Served)
}

// Connect pings the Engine at endpoint (a URL the Engine client accepts;
// the commands check it is unix:///<absolute path> first) and returns a
// client of it that sends userAgent and speaks exactly one API version
// ("1.<minor>") on every request, with the API version the Engine reports
// (served, its /_ping API-Version header, possibly ""). The version is pin
// when pin is not ""; with pin "" it is profiles.DaemonAPIVersionFor(served).
// /_ping is unversioned, so it goes out before the choice. The caller
// closes the client.
//
// Errors: *ClientError when no client can be built for endpoint and the
// pin; *NoEngineError when /_ping gets no answer within PingTimeout or
// before ctx ends; *UnservedError, with pin "", when served reaches no
// profile pin. Connect does not check that the Engine serves the version
// it pins: the first versioned request fails if it does not.
func Connect(ctx context.Context, endpoint, userAgent, pin string) (cli *client.Client, served string, err error) {
	first := pin
	if first == "" {
		first = profiles.DaemonAPIVersionFor("1.999") // the newest profile pin
	}
	cli, err = client.New(client.WithHost(endpoint), client.WithUserAgent(userAgent), client.WithAPIVersion(first))
	if err != nil {
		return nil, "", &ClientError{Endpoint: endpoint, Err: err}
	}
	pctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	ping, err := cli.Ping(pctx, client.PingOptions{})
	if err != nil {
		cli.Close()
		return nil, "", &NoEngineError{Endpoint: endpoint, Err: err}
	}
	if pin != "" {
		return cli, ping.APIVersion, nil
	}
	if pin = profiles.DaemonAPIVersionFor(ping.APIVersion); pin == "" {
		cli.Close()
		return nil, ping.APIVersion, &UnservedError{Endpoint: endpoint, Served: ping.APIVersion}
	}
	if pin == first {
		return cli, ping.APIVersion, nil
	}
	cli.Close()
	if cli, err = client.New(client.WithHost(endpoint), client.WithUserAgent(userAgent), client.WithAPIVersion(pin)); err != nil {
		return nil, ping.APIVersion, &ClientError{Endpoint: endpoint, Err: err}
	}
	return cli, ping.APIVersion, nil
}

// oneLine returns s up to its first line break.
func oneLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}
