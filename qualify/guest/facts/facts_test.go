package facts

import "testing"

// Only an Engine API's reply is one: another server's reply (the host's
// HTTP proxy, a metadata service), a TLS refusal or no reply is not.
func TestHTTPReplyEngineAPI(t *testing.T) {
	for _, tc := range []struct {
		r    *HTTPReply
		want bool
	}{
		{nil, false},
		{&HTTPReply{Status: 200, APIVersion: "1.52", Server: "Docker/29.1.3 (linux)", Body: "OK"}, true},
		{&HTTPReply{Status: 200, APIVersion: "1.41"}, true},
		{&HTTPReply{Status: 200, Server: "Docker/20.10.24+dfsg1 (linux)"}, true},
		{&HTTPReply{Status: 400, Body: "Client sent an HTTP request to an HTTPS server."}, false},
		{&HTTPReply{Status: 404, Server: "keryx"}, false},
		{&HTTPReply{Status: 200, Server: "nginx", Body: "OK"}, false},
	} {
		if got := tc.r.EngineAPI(); got != tc.want {
			t.Errorf("%+v.EngineAPI() = %v, want %v", tc.r, got, tc.want)
		}
	}
}

// A failed attempt is a refusal only with a refusal's errno and a control
// that started; a control that failed too makes it inconclusive whatever
// the errno. Facts from a probe before the control (none recorded) are
// read by the errno alone, as they were.
func TestReadUserns(t *testing.T) {
	started, failed := &Outcome{OK: true}, &Outcome{Errno: "EACCES", Error: "fork/exec x: permission denied"}
	for _, tc := range []struct {
		attempt, control *Outcome
		got              string
		refused          bool
	}{
		{nil, nil, "not attempted (no userNamespace in the facts)", false},
		{&Outcome{OK: true}, nil, "created", false},
		{&Outcome{OK: true, Error: "child in the new user namespace: exit status 2"}, nil, "created (child in the new user namespace: exit status 2)", false},
		{&Outcome{Errno: "EPERM"}, started, "EPERM", true},
		{&Outcome{Errno: "EACCES"}, started, "EACCES", true},
		{&Outcome{Errno: "ENOSPC"}, started, "ENOSPC", true},
		{&Outcome{Errno: "EUSERS"}, started, "EUSERS", true},
		{&Outcome{Errno: "EPERM"}, nil, "EPERM", true},
		{&Outcome{Errno: "EPERM"}, failed, "inconclusive: EPERM (the same child without CLONE_NEWUSER failed too: EACCES)", false},
		{&Outcome{Errno: "EACCES"}, failed, "inconclusive: EACCES (the same child without CLONE_NEWUSER failed too: EACCES)", false},
		{&Outcome{Error: "no path"}, &Outcome{Error: "no path"}, "inconclusive: no path (the same child without CLONE_NEWUSER failed too: no path)", false},
		{&Outcome{Errno: "EINVAL"}, started, "EINVAL", false},
		{&Outcome{Error: "no errno"}, started, "failed without an errno: no errno", false},
	} {
		got, refused := ReadUserns(tc.attempt, tc.control)
		if got != tc.got || refused != tc.refused {
			t.Errorf("ReadUserns(%+v, %+v) = %q, %t; want %q, %t", tc.attempt, tc.control, got, refused, tc.got, tc.refused)
		}
	}
}
