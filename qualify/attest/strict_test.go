package attest

import "testing"

func TestStrictJSONRejectsTrailingBytes(t *testing.T) {
	var v struct{ A int }
	if err := strictJSON([]byte(`{"A":1}`+" \n"), &v); err != nil {
		t.Fatalf("clean value with trailing space: %v", err)
	}
	for _, bad := range []string{`{"A":1}]`, `{"A":1}}`, `{"A":1}{"A":2}`, `{"A":1} x`, `{"A":1,"B":2}`} {
		if err := strictJSON([]byte(bad), &v); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
