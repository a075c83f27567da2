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
