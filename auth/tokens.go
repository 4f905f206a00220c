package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// tokenSet is the static tokens in force. Only SHA-256 digests are kept: the
// digests all have the same length, so comparing the presented token's digest
// with each of them in constant time reveals neither which token came close
// nor how long the tokens are, and a heap dump holds no usable credential.
type tokenSet struct {
	entries []tokenEntry
}

type tokenEntry struct {
	name   string
	digest [sha256.Size]byte
}

// lookup returns the name of the token whose digest equals the presented
// token's. Every entry is compared, and the index is chosen with
// ConstantTimeSelect, so the time taken does not depend on which entry (if
// any) matched.
func (s *tokenSet) lookup(token string) (string, bool) {
	if s == nil {
		return "", false
	}
	d := sha256.Sum256([]byte(token))
	found, idx := 0, 0
	for i := range s.entries {
		eq := subtle.ConstantTimeCompare(d[:], s.entries[i].digest[:])
		idx = subtle.ConstantTimeSelect(eq, i, idx)
		found |= eq
	}
	if found == 0 {
		return "", false
	}
	return s.entries[idx].name, true
}

func (s *tokenSet) len() int {
	if s == nil {
		return 0
	}
	return len(s.entries)
}

func (s *tokenSet) names() map[string]bool {
	m := map[string]bool{}
	if s != nil {
		for _, e := range s.entries {
			m[e.name] = true
		}
	}
	return m
}

// tokenBuilder gathers tokens from several sources and refuses duplicates
// across all of them: two names for one token would make the caller's name
// (and so its policy and rate limit) depend on the order of the entries.
type tokenBuilder struct {
	set     tokenSet
	names   map[string]bool
	digests map[[sha256.Size]byte]bool
}

func newTokenBuilder() *tokenBuilder {
	return &tokenBuilder{names: map[string]bool{}, digests: map[[sha256.Size]byte]bool{}}
}

// add parses one entry: "name:token", "token", "name:sha256:HEX" or
// "sha256:HEX". where says which entry it is for error messages, which never
// quote the entry: it may hold a credential.
func (b *tokenBuilder) add(entry, where string) error {
	name, d, err := parseEntry(entry)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if b.digests[d] {
		return fmt.Errorf("%s: the same token is listed twice", where)
	}
	if b.names[name] {
		return fmt.Errorf("%s: the name %q is used twice", where, name)
	}
	b.digests[d], b.names[name] = true, true
	b.set.entries = append(b.set.entries, tokenEntry{name: name, digest: d})
	return nil
}

// digestPrefix marks an entry that holds the SHA-256 of a token rather than
// the token. The gateway keeps only digests anyway, so a tokens file of
// digests works the same and gives a reader (the child runs as the gateway's
// user and may be able to read it) nothing to authenticate with. An unsalted
// hash is enough because the tokens it protects are long random strings,
// not passwords; a short token's digest could be brute-forced, which is why
// HashToken refuses to make one.
const digestPrefix = "sha256:"

// parseEntry returns an entry's name (derived from the digest when the entry
// has none) and its token's digest. Its errors never quote the entry.
func parseEntry(entry string) (string, [sha256.Size]byte, error) {
	var d [sha256.Size]byte
	entry = strings.TrimSpace(entry)
	if entry == "" {
		return "", d, errors.New("an empty token")
	}
	name, token, named := strings.Cut(entry, ":")
	if !named {
		name, token = "", name
	} else if strings.EqualFold(name+":", digestPrefix) {
		// "sha256:HEX": an unnamed digest. The name "sha256" is
		// therefore reserved, in any letter case, so that an entry
		// is never read as a digest and a named token by turns.
		name, token, named = "", digestPrefix+token, false
	}
	if named && !validName(name) {
		return "", d, errors.New("the part before ':' is not a token name (letters, digits, '.', '_', '-')")
	}
	if named && labelTaken(name) {
		return "", d, fmt.Errorf("the token name %q is reserved: the metrics name other callers so (jwt: every OAuth caller; anonymous: any caller without authentication)", name)
	}
	if len(token) >= len(digestPrefix) && strings.EqualFold(token[:len(digestPrefix)], digestPrefix) {
		h := token[len(digestPrefix):]
		bad := fmt.Errorf("after %q come the %d hex digits of the token's SHA-256 (gateway token -hash prints them)", digestPrefix, hex.EncodedLen(sha256.Size))
		if len(h) != hex.EncodedLen(sha256.Size) {
			return "", d, bad
		}
		if _, err := hex.Decode(d[:], []byte(h)); err != nil {
			return "", d, bad
		}
	} else {
		if err := checkToken(token); err != nil {
			return "", d, err
		}
		d = sha256.Sum256([]byte(token))
	}
	if !named {
		name = "token-" + hex.EncodeToString(d[:4])
	}
	return name, d, nil
}

// labelTaken reports whether a token named name would share its caller
// label in the metrics with callers that are no token: those are labelled
// by their kind, and "anonymous" without authentication.
func labelTaken(name string) bool {
	return strings.EqualFold(name, "jwt") || strings.EqualFold(name, "anonymous")
}

// checkToken refuses a plain token a client could not send or an attacker
// could guess.
func checkToken(token string) error {
	if token == "" {
		return errors.New("an empty token")
	}
	if !validBearer(token) {
		return errors.New("the token has characters a Bearer header cannot carry (RFC 6750 b64token)")
	}
	if len(token) < minToken {
		// A short token can be guessed, and a placeholder left in a
		// manifest must not start a gateway that anyone can call.
		return fmt.Errorf("the token has %d characters; it needs at least %d (for example: gateway token, or openssl rand -hex 32)", len(token), minToken)
	}
	return nil
}

// HashToken returns the tokens-file entry for token that holds its SHA-256
// instead of the token: "sha256:HEX", or "name:sha256:HEX" when name is not
// empty. It refuses what a plain entry would refuse (a short token, a bad
// name) and never quotes the token in its error.
func HashToken(name, token string) (string, error) {
	if name != "" && (!validName(name) || strings.EqualFold(name+":", digestPrefix) || labelTaken(name)) {
		return "", errors.New("auth: a token name has letters, digits, '.', '_', '-' and is not \"sha256\", \"jwt\" or \"anonymous\"")
	}
	if err := checkToken(token); err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	d := sha256.Sum256([]byte(token))
	entry := digestPrefix + hex.EncodeToString(d[:])
	if name != "" {
		entry = name + ":" + entry
	}
	return entry, nil
}

// addFile parses a tokens file: one entry a line, '#' comments and blank
// lines ignored.
func (b *tokenBuilder) addFile(data []byte, path string) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<10)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if err := b.add(text, fmt.Sprintf("%s line %d", path, line)); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// validName: names appear in logs, metrics labels and the policy file, so
// they are kept to a plain, unambiguous alphabet.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validBearer reports whether s is an RFC 6750 b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func validBearer(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// minToken is the shortest static token accepted.
const minToken = 16

var errMalformed = errors.New("malformed")

// bearer extracts the credential from an Authorization header value: the
// scheme "Bearer" in any letter case (RFC 7235 §2.1), one or more spaces, and
// exactly one b64token. Its length is bounded only by the server's limit on
// a request's headers (GATEWAY_MAX_HEADER_BYTES): an access token with many
// groups or roles (Entra ID's) passes 8 KiB, and what is done with a token
// (a scan, a SHA-256, base64 and JSON decoding) costs time in proportion to
// its length, as reading the header did, so a bound of its own would only
// refuse tokens that the server took in.
func bearer(header string) (string, error) {
	scheme, rest, ok := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: the Authorization scheme is not Bearer", errMalformed)
	}
	token := strings.TrimLeft(rest, " ")
	if !ok || token == "" {
		return "", fmt.Errorf("%w: the Bearer credential is missing", errMalformed)
	}
	if !validBearer(token) {
		return "", fmt.Errorf("%w: the Authorization header must carry exactly one Bearer token", errMalformed)
	}
	return token, nil
}
