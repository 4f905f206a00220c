package auth

import (
	"net/http"
	"net/url"
	"testing"
)

func TestCheckRedirect(t *testing.T) {
	req := func(u string) *http.Request {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Request{URL: p}
	}
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"https://a.example/x", "https://b.example/y", true},
		{"http://127.0.0.1:1/x", "https://b.example/y", true},
		{"http://127.0.0.1:1/x", "http://localhost:2/y", true},
		{"https://a.example/x", "http://b.example/y", false},
		{"https://127.0.0.1:1/x", "http://127.0.0.1:2/y", false},
		{"http://127.0.0.1:1/x", "http://10.0.0.1/y", false},
		{"https://a.example/x", "ftp://b.example/y", false},
	} {
		err := checkRedirect(req(tc.to), []*http.Request{req(tc.from)})
		if (err == nil) != tc.ok {
			t.Errorf("%s -> %s: %v, want ok %v", tc.from, tc.to, err, tc.ok)
		}
	}
}
