package auth

import "strings"

// Resource patterns are matched against URIs as strings, but the child that
// serves them may well turn a URI into a file path (file:// servers do,
// and so do many custom schemes). "demo://a/*" must then not reach
// demo://a/../b/secret, nor demo://a/%2e%2e/b once the child decodes it, nor
// a\..\b on a system where '\' separates paths, nor a name cut short at a NUL
// by a C library. So, for a caller whose resources are restricted, a URI that
// could step out of the tree its pattern names is refused outright, whatever
// the patterns say: no pattern can express "this tree, after normalisation",
// and a legitimate client has no reason to send such a URI.

// unsafeURI reports whether uri has a "." or ".." segment, an empty segment
// inside its path, a drive letter past its first segment, a percent-encoded
// '.', '/', '\' or NUL, a backslash, or a control character. Segments are
// split on '/' over the whole URI after its scheme, and each is cut at '?',
// '#' or ';': a query or a path parameter that reads as ".." is refused too,
// since a child may use either as a path. URI templates pass unless they
// have such a segment themselves: "{path}" and "{+path}" are plain text here.
func unsafeURI(uri string) bool {
	for i := 0; i < len(uri); i++ {
		switch c := uri[i]; {
		case c < 0x20 || c == 0x7f || c == '\\':
			return true
		case c == '%' && i+2 < len(uri):
			switch strings.ToLower(uri[i+1 : i+3]) {
			case "2e", "2f", "5c", "00":
				return true
			}
		}
	}
	rest := uri
	if n := schemeLen(uri, false); n > 0 {
		rest = uri[n+1:]
	}
	if after, ok := strings.CutPrefix(rest, "//"); ok {
		// The authority: its empty segments are the URI's syntax.
		authority, path := after, ""
		if i := strings.IndexByte(after, '/'); i >= 0 {
			authority, path = after[:i], after[i:]
		}
		if authority == "." || authority == ".." {
			return true // a child may take the host for a directory
		}
		rest = path
	}
	segs := strings.Split(rest, "/")
	for i, seg := range segs {
		if j := strings.IndexAny(seg, "?#;"); j >= 0 {
			seg = seg[:j]
		}
		switch {
		case seg == "." || seg == "..":
			return true
		case seg == "" && i > 0 && i < len(segs)-1:
			// "a//etc": a child that strips the pattern's prefix and
			// joins the rest to a directory gets an absolute path
			// (Python's os.path.join, Node's path.resolve).
			return true
		case i > 1 && len(seg) >= 2 && seg[1] == ':' && isLetter(seg[0]):
			// "a/C:/x": a drive letter mid-path is absolute on Windows.
			return true
		}
	}
	return false
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// lowerOrigin lowercases the scheme of s and, when s has an authority
// ("scheme://host..."), its host and port, which RFC 3986 §6.2.2.1 makes
// case-insensitive; the user info, path, query and fragment are left as
// they are. In a pattern, '*' may stand in the scheme or the host.
func lowerOrigin(s string, pattern bool) string {
	n := schemeLen(s, pattern)
	if n == 0 {
		return s
	}
	end := n + 1
	if strings.HasPrefix(s[end:], "//") {
		end += 2
		if i := strings.IndexAny(s[end:], "/?#"); i >= 0 {
			end += i
		} else {
			end = len(s)
		}
	}
	head := s[:end]
	// User info is case-sensitive: only what follows the last '@' is the
	// host.
	at := n + 1
	if i := strings.LastIndexByte(head, '@'); i > at {
		at = i
	}
	return strings.ToLower(head[:n+1]) + head[n+1:at] + strings.ToLower(head[at:]) + s[end:]
}

// schemeLen returns the length of s's scheme (RFC 3986 §3.1: a letter, then
// letters, digits, '+', '-' or '.'), which ':' must follow, or 0 when s does
// not start with one.
func schemeLen(s string, pattern bool) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case pattern && c == '*':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return i
		default:
			return 0
		}
	}
	return 0
}
