package httpapi

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// A 2025 session id is self-contained: it carries what the gateway keeps
// for the session, signed with the key the replicas share, so that any
// replica serves any session and none has to remember it. Its form is
//
//	s1.<base64url of a JSON object>.<base64url of HMAC-SHA256 over what precedes>
//
// The object's members are the gateway's own: n (a random nonce naming
// the session), v (the negotiated revision), e (expiry, Unix seconds), l
// (the log level, when set), o (a digest of the caller that made it, when
// the gateway authenticates) and c and i, the client's capabilities and
// clientInfo exactly as it sent them.
const sessionPrefix = "s1."

// maxSessionID bounds a session id's length: clients send it on every
// request, and proxies limit a header line (nginx to 8 KiB by default).
const maxSessionID = 4096

// claims are what a session id says.
type claims struct {
	nonce    string
	revision string
	expires  time.Time
	logLevel string
	owner    string // see caller.owner; "" without authentication
	caps     []byte // raw JSON, or nil
	info     []byte // raw JSON, or nil
}

// errSessionTooBig refuses an initialize whose capabilities cannot fit in
// a session id.
var errSessionTooBig = errors.New("the initialize request's capabilities and clientInfo are too large to keep in a session id")

// maxClaims is about what JSON a session id holds, after base64 and the
// signature.
const maxClaims = (maxSessionID - len(sessionPrefix) - 44) * 3 / 4

func newNonce() (string, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("cannot mint a session id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(raw[:]), nil
}

// seal signs c into a session id. A clientInfo that does not fit is cut
// down to its name and version (an icon as a data URI can take kilobytes);
// capabilities that do not fit refuse the session, since the gateway acts
// on them.
func seal(key []byte, c claims) (string, error) {
	id := sealed(key, c)
	if len(id) > maxSessionID && c.info != nil {
		c.info = nameAndVersion(c.info)
		id = sealed(key, c)
	}
	if len(id) > maxSessionID {
		return "", fmt.Errorf("%w: %d bytes of capabilities and %d of clientInfo (cut to its name and version), where a session id holds about %d bytes of JSON", errSessionTooBig, len(c.caps), len(c.info), maxClaims)
	}
	return id, nil
}

func sealed(key []byte, c claims) string {
	var b bytes.Buffer
	b.WriteString(`{"n":`)
	b.Write(jsonrpc.Quote(c.nonce))
	b.WriteString(`,"v":`)
	b.Write(jsonrpc.Quote(c.revision))
	b.WriteString(`,"e":`)
	b.WriteString(strconv.FormatInt(c.expires.Unix(), 10))
	if c.logLevel != "" {
		b.WriteString(`,"l":`)
		b.Write(jsonrpc.Quote(c.logLevel))
	}
	if c.owner != "" {
		b.WriteString(`,"o":`)
		b.Write(jsonrpc.Quote(c.owner))
	}
	// The client's own JSON is copied as it came, never re-encoded.
	if c.caps != nil {
		b.WriteString(`,"c":`)
		b.Write(c.caps)
	}
	if c.info != nil {
		b.WriteString(`,"i":`)
		b.Write(c.info)
	}
	b.WriteByte('}')
	body := sessionPrefix + base64.RawURLEncoding.EncodeToString(b.Bytes())
	return body + "." + base64.RawURLEncoding.EncodeToString(sign(key, body))
}

func sign(key []byte, body string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(body))
	return mac.Sum(nil)
}

// nameAndVersion keeps only clientInfo's name and version, as they came.
func nameAndVersion(info []byte) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for _, k := range []string{"name", "version"} {
		if v := jsonrpc.Get(info, k); v != nil {
			if b.Len() > 1 {
				b.WriteByte(',')
			}
			b.Write(jsonrpc.Quote(k))
			b.WriteByte(':')
			b.Write(v)
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

var strict = base64.RawURLEncoding.Strict()

// errForeignSession is a session id this gateway did not sign: altered,
// made up, or signed with another key.
var errForeignSession = errors.New("the session id is not one this gateway issued (altered, or signed with another GATEWAY_SECRET)")

// open verifies a session id and reads its claims. Only a verified body
// is decoded: until then it is the client's, and nothing of it is read.
func open(key []byte, id string) (claims, error) {
	i := strings.LastIndexByte(id, '.')
	if !strings.HasPrefix(id, sessionPrefix) || len(id) > maxSessionID || i < len(sessionPrefix) {
		return claims{}, errForeignSession
	}
	body, mac64 := id[:i], id[i+1:]
	// Strict: the unused low bits of the last character count too, so
	// that no other spelling of the same bytes passes.
	sum, err := strict.DecodeString(mac64)
	if err != nil || !hmac.Equal(sum, sign(key, body)) {
		return claims{}, errForeignSession
	}
	raw, err := strict.DecodeString(strings.TrimPrefix(body, sessionPrefix))
	if err != nil {
		return claims{}, errForeignSession
	}
	var v struct {
		N string          `json:"n"`
		V string          `json:"v"`
		E int64           `json:"e"`
		L string          `json:"l"`
		O string          `json:"o"`
		C json.RawMessage `json:"c"`
		I json.RawMessage `json:"i"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.N == "" {
		// Signed but unreadable: a bug of the gateway's, or a key shared
		// with something else.
		return claims{}, fmt.Errorf("%w: its signed contents do not decode", errForeignSession)
	}
	return claims{nonce: v.N, revision: v.V, expires: time.Unix(v.E, 0), logLevel: v.L, owner: v.O, caps: v.C, info: v.I}, nil
}
