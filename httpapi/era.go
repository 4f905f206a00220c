package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// A mirrored header carries a value that is not header-safe as
// =?base64?...?=.
const base64Prefix, base64Tail = "=?base64?", "?="

// rpcFailure is a request the gateway refuses, with its HTTP status.
type rpcFailure struct {
	status int
	err    *jsonrpc.Error
}

func refuse(status, code int, msg string, data any) *rpcFailure {
	e := &jsonrpc.Error{Code: code, Message: msg}
	if data != nil {
		e.Data, _ = json.Marshal(data)
	}
	return &rpcFailure{status, e}
}

func mismatch(format string, args ...any) *rpcFailure {
	return refuse(http.StatusBadRequest, mcp.CodeHeaderMismatch, fmt.Sprintf(format, args...), nil)
}

// isModern tells a 2026-07-28 request from a legacy one: a modern client
// marks every request, with the MCP-Protocol-Version header (a version that
// is not a legacy one) or with its version in _meta. req may be nil (a
// response).
func isModern(r *http.Request, req *mcp.Request) bool {
	if req != nil && req.Modern() {
		return true
	}
	if v := strings.TrimSpace(r.Header.Get(mcp.HeaderProtocolVersionKey)); v != "" && !mcp.IsLegacy(v) {
		// initialize agrees on a revision in its body: a header naming one
		// the gateway does not know leaves that to the answer, which
		// names the revision the gateway speaks.
		return v == mcp.Modern || req == nil || req.Method != mcp.MethodInitialize
	}
	return false
}

// modernCaller checks a modern request as 2026-07-28 says, before anything
// reaches the child: the metadata in _meta, the headers that mirror the
// body, the version, and methods the revision removed.
func modernCaller(r *http.Request, req *mcp.Request) (bridge.Caller, *rpcFailure) {
	version, _ := req.MetaString(mcp.MetaProtocolVersion)
	if h, err := headerValue(r, mcp.HeaderProtocolVersionKey); version == "" && err == nil && h != "" && h != mcp.Modern && !mcp.IsLegacy(h) {
		// A version the gateway does not know, named in the header alone:
		// what it lacks in _meta is beside the point.
		return bridge.Caller{}, unsupportedVersion(h)
	}
	caps, _ := req.Meta(mcp.MetaClientCapabilities)
	if version == "" || len(caps) == 0 || caps[0] != '{' {
		return bridge.Caller{}, refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams,
			"params._meta must carry "+mcp.MetaProtocolVersion+" (a string) and "+mcp.MetaClientCapabilities+" (an object)", nil)
	}
	header, err := headerValue(r, mcp.HeaderProtocolVersionKey)
	switch {
	case err != nil:
		return bridge.Caller{}, mismatch("%s: %v", mcp.HeaderProtocolVersion, err)
	case header == "":
		return bridge.Caller{}, mismatch("the %s header is required and must equal _meta %s (%q)", mcp.HeaderProtocolVersion, mcp.MetaProtocolVersion, version)
	case header != version:
		return bridge.Caller{}, mismatch("the %s header (%q) does not match _meta %s (%q)", mcp.HeaderProtocolVersion, header, mcp.MetaProtocolVersion, version)
	}
	if version != mcp.Modern {
		return bridge.Caller{}, unsupportedVersion(version)
	}
	if f := checkMirrored(r, req); f != nil {
		return bridge.Caller{}, f
	}
	if mcp.RemovedInModern(req.Method) {
		return bridge.Caller{}, refuse(http.StatusNotFound, jsonrpc.CodeMethodNotFound,
			fmt.Sprintf("method not found: %s was removed in %s", req.Method, mcp.Modern), nil)
	}
	info, _ := req.Meta(mcp.MetaClientInfo)
	c := bridge.Caller{Modern: true, Capabilities: caps, ClientInfo: info}
	if _, ok := req.Meta(mcp.MetaLogLevel); ok {
		level, _ := req.MetaString(mcp.MetaLogLevel)
		if mcp.LogRank(level) < 0 {
			return bridge.Caller{}, refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams,
				"_meta "+mcp.MetaLogLevel+" must be one of "+strings.Join(mcp.LogLevels(), ", "), nil)
		}
		c.LogLevel = level
	}
	return c, nil
}

// unsupportedVersion refuses a request of a protocol version the gateway
// does not speak, as 2026-07-28 says: 400, -32022, and the versions that
// would do. A 2025 revision is served too, but by the initialize handshake,
// which a client of this error does not do.
func unsupportedVersion(v string) *rpcFailure {
	return refuse(http.StatusBadRequest, mcp.CodeUnsupportedVersion,
		fmt.Sprintf("unsupported protocol version %q (this gateway speaks %s, and through initialize %s)", v, mcp.Modern, strings.Join(mcp.LegacyRevisions(), ", ")),
		// The versions server/discover names: the suite checks that
		// the two agree. A 2025 client learns the 2025 ones from
		// initialize, and the message names them.
		map[string]any{"supported": []string{mcp.Modern}, "requested": v})
}

// checkMirrored compares the Mcp-Method and Mcp-Name headers with the body
// they mirror.
func checkMirrored(r *http.Request, req *mcp.Request) *rpcFailure {
	method, err := headerValue(r, mcp.HeaderMethod)
	switch {
	case err != nil:
		return mismatch("%s: %v", mcp.HeaderMethod, err)
	case method == "":
		return mismatch("the %s header is required and must equal the body's method (%q)", mcp.HeaderMethod, req.Method)
	case method != req.Method:
		return mismatch("the %s header (%q) does not match the body's method (%q)", mcp.HeaderMethod, method, req.Method)
	}
	field := mcp.NameField(req.Method)
	if field == "" {
		return nil
	}
	want, isString := req.String(field)
	// Not a header matter: the body itself is wrong.
	if v, present := req.Param(field); !present {
		return refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams, fmt.Sprintf("%s needs params.%s (a string)", req.Method, field), nil)
	} else if !isString {
		return refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams, fmt.Sprintf("params.%s must be a string, not %s", field, clip(string(v))), nil)
	}
	name, err := headerValue(r, mcp.HeaderName)
	switch {
	case err != nil:
		return mismatch("%s: %v", mcp.HeaderName, err)
	case name == "" && r.Header.Get(mcp.HeaderName) == "":
		return mismatch("the %s header is required for %s and must equal params.%s (%q)", mcp.HeaderName, req.Method, field, want)
	case name != want:
		return mismatch("the %s header (%q) does not match params.%s (%q)", mcp.HeaderName, name, field, want)
	}
	return nil
}

// headerValue reads a mirrored header: surrounding whitespace is not part
// of the value, and =?base64?...?= carries a value that is not header-safe.
// A header sent twice, or with characters a header may not carry as they
// are, is refused: an intermediary that reads the other copy, or decodes
// the bytes otherwise, must never see another value than the gateway.
func headerValue(r *http.Request, name string) (string, error) {
	// One lookup, by the canonical name (no copy when it is one already).
	vs := r.Header[http.CanonicalHeaderKey(name)]
	if len(vs) > 1 {
		return "", fmt.Errorf("sent %d times; send it once", len(vs))
	}
	var v string
	if len(vs) == 1 {
		v = strings.TrimSpace(vs[0])
	}
	if !headerSafe(v) {
		return "", errors.New("the value has characters outside printable ASCII; send such a value as =?base64?...?=")
	}
	if !strings.HasPrefix(v, base64Prefix) || !strings.HasSuffix(v, base64Tail) || len(v) < len(base64Prefix)+len(base64Tail) {
		return v, nil
	}
	decoded, err := base64.StdEncoding.Strict().DecodeString(v[len(base64Prefix) : len(v)-len(base64Tail)])
	if err != nil {
		return "", fmt.Errorf("invalid base64 value: %w", err)
	}
	return string(decoded), nil
}

// childErrorStatus is the HTTP status 2026-07-28 gives an error the child
// returned to a modern request: method-not-found is 404, and the spec's
// request-validation errors are 400. Any other answer is 200.
func childErrorStatus(code int) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case mcp.CodeHeaderMismatch, mcp.CodeMissingCapability, mcp.CodeUnsupportedVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}
