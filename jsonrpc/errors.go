package jsonrpc

import (
	"encoding/json"
	"fmt"
)

// Standard JSON-RPC codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// The gateway's own codes. MCP reserves -32020..-32099 for the spec's own
// errors (-32020/-32021/-32022 today), so the gateway takes -32000..-32019.
// Every gateway-made error also carries data.source = "gateway" and a
// data.reason word, so it cannot be mistaken for one the child sent.
const (
	CodeUnavailable  = -32000 // no child to serve the call, or it went away mid-call
	CodeTimeout      = -32001 // no answer in time; the child was told to cancel
	CodeOverloaded   = -32003 // too many calls in flight
	CodeTooLarge     = -32004 // the child's answer exceeded the message size limit
	CodeShutdown     = -32005 // the gateway is stopping
	CodeCancelled    = -32006 // the client cancelled the call
	CodeUnauthorized = -32007 // no valid credentials (HTTP 401)
	CodeForbidden    = -32008 // outside the caller's policy (HTTP 403)
	CodeRateLimited  = -32009 // the caller sent more than its limit allows (HTTP 429)
	CodeBadAnswer    = -32010 // the child answered the call with a message that is not valid JSON-RPC (HTTP 502)
)

// Error is a JSON-RPC error object. Errors the gateway makes are values of
// this type; errors a child sends are relayed as raw bytes and never decoded.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// GatewayError builds an error marked as the gateway's own.
func GatewayError(code int, reason, msg string) *Error {
	data, _ := json.Marshal(struct {
		Source string `json:"source"`
		Reason string `json:"reason"`
	}{"gateway", reason})
	return &Error{Code: code, Message: msg, Data: data}
}
