package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
)

const modernVersion = bridge.ModernVersion

// legacyVersions are the revisions whose clients use initialize.
var legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// MCP error codes of 2026-07-28 that the gateway returns itself.
const (
	codeHeaderMismatch       = -32020
	codeMissingCapability    = -32021
	codeUnsupportedVersion   = -32022
	metaProtocolVersion      = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities   = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo           = "io.modelcontextprotocol/clientInfo"
	metaLogLevel             = "io.modelcontextprotocol/logLevel"
	headerProtocolVersion    = "MCP-Protocol-Version"
	headerMethod             = "Mcp-Method"
	headerName               = "Mcp-Name"
	base64Prefix, base64Tail = "=?base64?", "?="
)

// removedMethods are legacy methods that 2026-07-28 took away; a modern
// request for one is refused even though a legacy child would serve it.
var removedMethods = []string{"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}

var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

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
	return refuse(http.StatusBadRequest, codeHeaderMismatch, fmt.Sprintf(format, args...), nil)
}

// isModern tells a 2026-07-28 request from a legacy one: a modern client
// marks every request, with the MCP-Protocol-Version header (a version that
// is not a legacy one) or with its version in _meta.
func isModern(r *http.Request, meta map[string]json.RawMessage) bool {
	if v := strings.TrimSpace(r.Header.Get(headerProtocolVersion)); v != "" && !slices.Contains(legacyVersions, v) {
		return true
	}
	_, ok := meta[metaProtocolVersion]
	return ok
}

// requestMeta decodes params._meta, the only part of params the gateway
// reads besides the progress token and the names headers mirror.
func requestMeta(msg *jsonrpc.Message) map[string]json.RawMessage {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(msg.Params) > 0 && msg.Params[0] == '{' {
		_ = json.Unmarshal(msg.Params, &p)
	}
	return p.Meta
}

// modernCaller checks a modern request as 2026-07-28 says, before anything
// reaches the child: the metadata in _meta, the headers that mirror the
// body, the version, and methods the revision removed.
func modernCaller(r *http.Request, msg *jsonrpc.Message, meta map[string]json.RawMessage) (bridge.Caller, *rpcFailure) {
	var version string
	caps := meta[metaClientCapabilities]
	if json.Unmarshal(meta[metaProtocolVersion], &version) != nil || version == "" || len(caps) == 0 || caps[0] != '{' {
		return bridge.Caller{}, refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams,
			"params._meta must carry "+metaProtocolVersion+" (a string) and "+metaClientCapabilities+" (an object)", nil)
	}
	header, err := headerValue(r, headerProtocolVersion)
	switch {
	case err != nil:
		return bridge.Caller{}, mismatch("%s: %v", headerProtocolVersion, err)
	case header == "":
		return bridge.Caller{}, mismatch("the %s header is required and must equal _meta %s (%q)", headerProtocolVersion, metaProtocolVersion, version)
	case header != version:
		return bridge.Caller{}, mismatch("the %s header (%q) does not match _meta %s (%q)", headerProtocolVersion, header, metaProtocolVersion, version)
	}
	if version != modernVersion {
		return bridge.Caller{}, refuse(http.StatusBadRequest, codeUnsupportedVersion,
			fmt.Sprintf("unsupported protocol version %q", version),
			map[string]any{"supported": []string{modernVersion}, "requested": version})
	}
	if f := checkMirrored(r, msg); f != nil {
		return bridge.Caller{}, f
	}
	if slices.Contains(removedMethods, msg.Method) {
		return bridge.Caller{}, refuse(http.StatusNotFound, jsonrpc.CodeMethodNotFound,
			fmt.Sprintf("method not found: %s was removed in %s", msg.Method, modernVersion), nil)
	}
	c := bridge.Caller{Modern: true, Capabilities: caps, ClientInfo: meta[metaClientInfo]}
	if raw, ok := meta[metaLogLevel]; ok {
		if json.Unmarshal(raw, &c.LogLevel) != nil || !slices.Contains(logLevels, c.LogLevel) {
			return bridge.Caller{}, refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams,
				"_meta "+metaLogLevel+" must be one of "+strings.Join(logLevels, ", "), nil)
		}
	}
	return c, nil
}

// checkMirrored compares the Mcp-Method and Mcp-Name headers with the body
// they mirror.
func checkMirrored(r *http.Request, msg *jsonrpc.Message) *rpcFailure {
	method, err := headerValue(r, headerMethod)
	switch {
	case err != nil:
		return mismatch("%s: %v", headerMethod, err)
	case method == "":
		return mismatch("the %s header is required and must equal the body's method (%q)", headerMethod, msg.Method)
	case method != msg.Method:
		return mismatch("the %s header (%q) does not match the body's method (%q)", headerMethod, method, msg.Method)
	}
	field := nameField(msg.Method)
	if field == "" {
		return nil
	}
	var want string
	if sp, ok, _ := jsonrpc.Lookup(msg.Params, field); ok {
		_ = json.Unmarshal(msg.Params[sp.Start:sp.End], &want)
	}
	name, err := headerValue(r, headerName)
	switch {
	case err != nil:
		return mismatch("%s: %v", headerName, err)
	case name == "" && r.Header.Get(headerName) == "":
		return mismatch("the %s header is required for %s and must equal params.%s (%q)", headerName, msg.Method, field, want)
	case name != want:
		return mismatch("the %s header (%q) does not match params.%s (%q)", headerName, name, field, want)
	}
	return nil
}

// nameField is the params field that Mcp-Name mirrors for a method.
func nameField(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read":
		return "uri"
	case "tasks/get", "tasks/update", "tasks/cancel":
		return "taskId"
	}
	return ""
}

// headerValue reads a mirrored header: surrounding whitespace is not part
// of the value, and =?base64?...?= carries a value that is not header-safe.
func headerValue(r *http.Request, name string) (string, error) {
	v := strings.TrimSpace(r.Header.Get(name))
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
	case codeHeaderMismatch, codeMissingCapability, codeUnsupportedVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}
