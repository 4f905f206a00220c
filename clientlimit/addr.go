package clientlimit

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Addr is the client's address as the gateway should believe it: the IP of
// r.RemoteAddr, unless that peer is a trusted proxy. Then X-Forwarded-For
// (all its header lines, joined in order) is walked from the right, where
// the nearest proxy appended what it saw, skipping trusted proxies; the
// first address that is not trusted is the client. Everything left of it
// was written by parties nobody vouches for, so it is never read. A
// malformed entry ends the walk, and the last address believed so far is
// the answer; when every entry is trusted, the leftmost is.
//
// The result is a netip.Addr in string form, IPv4-mapped IPv6 addresses
// unmapped and zones dropped (two link-local hosts on different interfaces
// count as one client). A RemoteAddr that holds no IP (a Unix socket's) is
// returned as it is.
func Addr(r *http.Request, trusted []netip.Prefix) string {
	peer, ok := parseHostAddr(r.RemoteAddr)
	if !ok {
		return r.RemoteAddr
	}
	if !isTrusted(peer, trusted) {
		return inPlace(peer, r.RemoteAddr)
	}
	lines := r.Header.Values("X-Forwarded-For")
	believed := peer
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.TrimSpace(lines[i]) == "" {
			continue // an empty line adds no hop
		}
		entries := strings.Split(lines[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			a, ok := parseHostAddr(strings.TrimSpace(entries[j]))
			if !ok {
				return believed.String()
			}
			believed = a
			if !isTrusted(a, trusted) {
				return a.String()
			}
		}
	}
	return believed.String()
}

// ParseProxies reads the trusted proxies: CIDR prefixes ("10.0.0.0/8") or
// single addresses ("192.168.1.1", a /32 or /128). Blank entries are
// skipped; a prefix with host bits set is masked ("10.1.2.3/8" trusts
// 10.0.0.0/8).
func ParseProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, entry := range list {
		s := strings.TrimSpace(entry)
		if s == "" {
			continue
		}
		p, err := parseProxy(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: %w", entry, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func parseProxy(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		// Addresses are unmapped before they are matched, so a prefix of
		// IPv4-mapped addresses is turned into the IPv4 prefix it means.
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			return netip.PrefixFrom(a.Unmap(), p.Bits()-96).Masked(), nil
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("zone %q: a proxy is matched by address only", a.Zone())
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// parseHostAddr reads an address in any of the forms a RemoteAddr or a
// proxy writes: "1.2.3.4", "1.2.3.4:80", "::1", "[::1]", "[::1]:80",
// "[fe80::1%eth0]:80".
func parseHostAddr(s string) (netip.Addr, bool) {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	} else if len(s) > 1 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// inPlace is a's string form, taken from remote (host:port) when it is
// already written there that way, as it is for any IPv4 peer: every call
// asks, and this spares it a string of its own.
func inPlace(a netip.Addr, remote string) string {
	var buf [64]byte
	if host, _, err := net.SplitHostPort(remote); err == nil && string(a.AppendTo(buf[:0])) == host {
		return host
	}
	return a.String()
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
