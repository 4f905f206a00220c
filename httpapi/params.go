package httpapi

import (
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// checkParamHeaders compares a modern tools/call's Mcp-Param-* headers with
// the arguments they mirror, per the tool's x-mcp-header annotations (from
// the bridge's cache of the child's tools/list): an intermediary may have
// routed on the header, so the child must not act on a body that says
// otherwise. A header is required when its argument is in the body, and
// refused when it is not.
func (h *handlers) checkParamHeaders(r *http.Request, req *mcp.Request) *rpcFailure {
	tool, _ := req.String(mcp.ParamName)
	annotations, err := h.b.ToolHeaders(r.Context(), tool)
	if err != nil {
		// Unchecked headers may have routed the request somewhere its body
		// does not go: without the list, the call is refused.
		var e *jsonrpc.Error
		if errors.As(err, &e) && (e.Code == jsonrpc.CodeUnavailable || e.Code == jsonrpc.CodeShutdown) {
			// No child serving, or the gateway stopping: the call is told
			// so as any call is, in the words REST uses too, and nothing
			// is logged beyond what any refused call logs (a restart
			// would otherwise log a warning for every call meanwhile).
			return &rpcFailure{statusFor(e.Code), e}
		}
		h.log.WarnContext(r.Context(), "cannot check Mcp-Param headers: the tool list is unavailable", "tool", clip(tool), "err", err)
		switch {
		case errors.As(err, &e) && e.Code != jsonrpc.CodeInternalError:
			// The gateway's reason (an answer over the size limit, a
			// timeout) and its status: a list over the limit
			// is not a child that comes back in a second.
			return &rpcFailure{statusFor(e.Code), &jsonrpc.Error{Code: e.Code,
				Message: "the child's tool list could not be read, so the Mcp-Param headers cannot be checked: " + e.Message, Data: e.Data}}
		}
		return &rpcFailure{http.StatusServiceUnavailable, jsonrpc.GatewayError(jsonrpc.CodeUnavailable, "child_unavailable",
			fmt.Sprintf("the child's tool list could not be read, so the Mcp-Param headers cannot be checked: %v", err))}
	}
	args, _ := req.Param(mcp.ParamArguments)
	for _, a := range annotations {
		name := mcp.HeaderParamPrefix + a.Name
		values := r.Header.Values(name)
		var sp jsonrpc.Span
		var found bool
		if args != nil {
			sp, found, err = jsonrpc.Lookup(args, a.Path...)
		}
		if err != nil {
			// The header mirrors a member the child could read otherwise.
			var amb *jsonrpc.AmbiguousError
			if errors.As(err, &amb) {
				amb.Path = append([]string{"params", mcp.ParamArguments}, amb.Path...)
			}
			return refuse(http.StatusBadRequest, jsonrpc.CodeInvalidRequest, err.Error(), nil)
		}
		var body []byte
		if found {
			body = args[sp.Start:sp.End]
		}
		absent := body == nil || string(body) == "null"
		arg := "arguments." + strings.Join(a.Path, ".")
		switch {
		case absent && len(values) > 0:
			return mismatch("the %s header is sent, but %s is not in the body", name, arg)
		case absent:
			continue
		case len(values) == 0:
			return mismatch("the %s header is required: %s is in the body", name, arg)
		}
		value, err := headerValue(r, name) // refuses a header sent twice, or not header-safe
		if err != nil {
			return mismatch("%s: %v", name, err)
		}
		if !sameValue(body, value) {
			return mismatch("the %s header (%q) does not match %s (%s)", name, value, arg, body)
		}
	}
	return nil
}

// headerSafe: visible ASCII, with spaces and tabs inside.
func headerSafe(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return false
		}
	}
	return true
}

// sameValue compares an argument's JSON value with its header text: strings
// as text, numbers by value (42 and 42.0 agree), booleans as true/false.
func sameValue(body []byte, header string) bool {
	switch body[0] {
	case '"':
		s, ok := mcp.String(body)
		return ok && s == header
	case 't', 'f':
		return string(body) == header
	default:
		// Exactly, not as float64s: 9007199254740993 is not ...992.
		a, ok1 := new(big.Float).SetPrec(512).SetString(string(body))
		b, ok2 := new(big.Float).SetPrec(512).SetString(header)
		return ok1 && ok2 && a.Cmp(b) == 0
	}
}
