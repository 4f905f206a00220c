package auth

import "testing"

func TestUnsafeURI(t *testing.T) {
	for _, tc := range []struct {
		uri  string
		want bool
	}{
		{"demo://a/b", false},
		{"file:///etc/app/x.txt", false},
		{"file:///{path}", false},
		{"file:///{+path}", false},
		{"test://template/{id}/data", false},
		{"demo://a/{.ext}", false},
		{"demo://a/b.c/..d/e..", false},
		{"demo://a/...", false},
		{"demo://a/b?q=1#f", false},
		{"demo://a/100%25", false},
		{"demo://a/%41", false},
		{"x:y", false},
		{"", false},
		{"demo://a/../b", true},
		{"demo://a/./b", true},
		{"demo://a/..", true},
		{"demo://a/.", true},
		{"demo://a/..?x", true},
		{"demo://a/..#x", true},
		{"demo://a/..;x/b", true},
		{"demo://a/b?p=/../c", true},
		{"demo://../b", true},
		{"x:../secret", true},
		{"../secret", true},
		{"demo://a/%2e%2e/b", true},
		{"demo://a/%2E%2e/b", true},
		{"demo://a/.%2E/b", true},
		{"demo://a%2fb", true},
		{"demo://a%2Fb", true},
		{"demo://a%5cb", true},
		{"demo://a%5Cb", true},
		{"demo://a/b%00.txt", true},
		{`demo://a\..\b`, true},
		{`demo://a\b`, true},
		{"demo://a/b\x00", true},
		{"demo://a/b\nc", true},
		{"demo://a/b\tc", true},
		{"demo://a/b\x7f", true},
		{"demo://a/b/", false},
		{"file:///C:/data/x", false},
		{"file:///srv/public//etc/passwd", true},
		{"demo://a/b//c", true},
		{"demo://a//", true},
		{"file:///srv/public/C:/Windows", true},
		{"demo://a/%2", false},
		{"demo://a/%", false},
	} {
		if got := unsafeURI(tc.uri); got != tc.want {
			t.Errorf("unsafeURI(%q) = %v, want %v", tc.uri, got, tc.want)
		}
	}
}

func TestLowerOrigin(t *testing.T) {
	for _, tc := range []struct {
		in      string
		pattern bool
		want    string
	}{
		{"DEMO://Host.Example/Path/X", false, "demo://host.example/Path/X"},
		{"Demo://Host:8080?Q=A#F", false, "demo://host:8080?Q=A#F"},
		{"Demo://HOST", false, "demo://host"},
		{"FILE:///Etc/X", false, "file:///Etc/X"},
		{"Demo://User:PW@Host/P", false, "demo://User:PW@host/P"},
		{"URN:Example:Thing", false, "urn:Example:Thing"},
		{"Not A URI", false, "Not A URI"},
		{"1x://A", false, "1x://A"},
		{"Demo://*/X", true, "demo://*/X"},
		{"*://HOST/X", true, "*://host/X"},
		{"*://HOST/X", false, "*://HOST/X"},
		{"Demo*", true, "Demo*"},
	} {
		if got := lowerOrigin(tc.in, tc.pattern); got != tc.want {
			t.Errorf("lowerOrigin(%q, %v) = %q, want %q", tc.in, tc.pattern, got, tc.want)
		}
	}
}
