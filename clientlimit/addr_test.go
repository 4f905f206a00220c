package clientlimit

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestAddr(t *testing.T) {
	proxies := mustProxies(t, "10.0.0.0/8", "192.168.1.1", "2001:db8:ff::/48")
	tests := []struct {
		name    string
		remote  string
		xff     []string // header lines, in order
		trusted []netip.Prefix
		want    string
	}{
		{"no proxies: XFF ignored", "203.0.113.7:4711", []string{"1.2.3.4"}, nil, "203.0.113.7"},
		{"untrusted peer: XFF ignored", "203.0.113.7:4711", []string{"1.2.3.4"}, proxies, "203.0.113.7"},
		{"trusted peer without XFF", "10.1.2.3:80", nil, proxies, "10.1.2.3"},
		{"trusted peer, one hop", "10.1.2.3:80", []string{"198.51.100.9"}, proxies, "198.51.100.9"},
		{"spoofed chain: the first untrusted from the right", "10.1.2.3:80", []string{"6.6.6.6, 1.2.3.4, 10.0.0.5"}, proxies, "1.2.3.4"},
		{"single trusted address", "192.168.1.1:9", []string{"5.6.7.8, 192.168.1.1"}, proxies, "5.6.7.8"},
		{"a neighbour of a single trusted address is not trusted", "192.168.1.2:9", []string{"5.6.7.8"}, proxies, "192.168.1.2"},
		{"all trusted: leftmost", "10.1.2.3:80", []string{"10.9.9.9, 10.0.0.5"}, proxies, "10.9.9.9"},
		{"garbage stops the walk at the last good address", "10.1.2.3:80", []string{"1.2.3.4, nonsense, 10.0.0.5"}, proxies, "10.0.0.5"},
		{"garbage right after the peer", "10.1.2.3:80", []string{"1.2.3.4, unknown"}, proxies, "10.1.2.3"},
		{"empty entry is malformed", "10.1.2.3:80", []string{"1.2.3.4,,10.0.0.5"}, proxies, "10.0.0.5"},
		{"garbage left of the client is never read", "10.1.2.3:80", []string{"<script>, 1.2.3.4"}, proxies, "1.2.3.4"},
		{"entries with ports and brackets", "10.1.2.3:80", []string{"[2001:db8::7]:443, 10.0.0.5:8080"}, proxies, "2001:db8::7"},
		{"bracketed entry without port", "10.1.2.3:80", []string{"[2001:db8::8]"}, proxies, "2001:db8::8"},
		{"several header lines, joined in order", "10.1.2.3:80", []string{"9.9.9.9, 1.1.1.1", "10.0.0.7", "10.0.0.5"}, proxies, "1.1.1.1"},
		{"an empty header line adds no hop", "10.1.2.3:80", []string{"1.1.1.1", "", "10.0.0.5"}, proxies, "1.1.1.1"},
		{"IPv6 peer with brackets and port", "[2001:db8::1]:8443", nil, nil, "2001:db8::1"},
		{"IPv6 peer with zone", "[fe80::1%eth0]:8443", nil, nil, "fe80::1"},
		{"IPv6 peer without port", "2001:db8::2", nil, nil, "2001:db8::2"},
		{"IPv6 peer in capitals", "[2001:DB8::A]:1", nil, nil, "2001:db8::a"},
		{"untrusted IPv4-mapped peer is unmapped", "[::ffff:203.0.113.9]:80", nil, nil, "203.0.113.9"},
		{"IPv4 peer without port", "203.0.113.8", nil, nil, "203.0.113.8"},
		{"trusted IPv6 proxy", "[2001:db8:ff::1]:443", []string{"2001:db8:1::9"}, proxies, "2001:db8:1::9"},
		{"IPv4-mapped peer is unmapped and trusted", "[::ffff:10.0.0.9]:80", []string{"1.2.3.4"}, proxies, "1.2.3.4"},
		{"IPv4-mapped entry is unmapped", "10.1.2.3:80", []string{"::ffff:1.2.3.4"}, proxies, "1.2.3.4"},
		{"not an IP (a Unix socket)", "@", []string{"1.2.3.4"}, proxies, "@"},
		{"empty RemoteAddr", "", nil, proxies, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/mcp", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := Addr(r, tt.trusted); got != tt.want {
				t.Errorf("Addr(RemoteAddr %q, X-Forwarded-For %q) = %q, want %q", tt.remote, tt.xff, got, tt.want)
			}
		})
	}
}

// The address of a peer not behind a proxy is the one in RemoteAddr, not
// a string made for every request.
func TestAddrOfAPlainPeerAllocatesNothing(t *testing.T) {
	r := httptest.NewRequest("POST", "/mcp", nil)
	r.RemoteAddr = "203.0.113.7:4711"
	if n := testing.AllocsPerRun(100, func() { _ = Addr(r, nil) }); n != 0 {
		t.Errorf("%v allocations per call", n)
	}
}

func TestParseProxies(t *testing.T) {
	tests := []struct {
		in      []string
		want    []string
		wantErr string // a part of the error: the bad entry
	}{
		{in: nil, want: nil},
		{in: []string{"10.0.0.0/8", " 192.168.1.1 ", "", "2001:db8::/32", "::1"},
			want: []string{"10.0.0.0/8", "192.168.1.1/32", "2001:db8::/32", "::1/128"}},
		{in: []string{"10.1.2.3/8"}, want: []string{"10.0.0.0/8"}},
		{in: []string{"::ffff:10.0.0.0/104"}, want: []string{"10.0.0.0/8"}},
		{in: []string{"::ffff:10.0.0.1"}, want: []string{"10.0.0.1/32"}},
		{in: []string{"10.0.0.0/8", "10.0.0.0/33"}, wantErr: `"10.0.0.0/33"`},
		{in: []string{"proxy.local"}, wantErr: `"proxy.local"`},
		{in: []string{"1.2.3.4:80"}, wantErr: `"1.2.3.4:80"`},
		{in: []string{"fe80::1%eth0"}, wantErr: `"fe80::1%eth0"`},
	}
	for _, tt := range tests {
		got, err := ParseProxies(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseProxies(%q) error = %v, want one naming %s", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseProxies(%q): %v", tt.in, err)
			continue
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if strings.Join(s, " ") != strings.Join(tt.want, " ") {
			t.Errorf("ParseProxies(%q) = %q, want %q", tt.in, s, tt.want)
		}
	}
}

func mustProxies(t *testing.T, list ...string) []netip.Prefix {
	t.Helper()
	p, err := ParseProxies(list)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
