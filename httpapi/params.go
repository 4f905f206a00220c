package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/stdiomcp/gateway/jsonrpc"
)

const headerParamPrefix = "Mcp-Param-"

// checkParamHeaders compares a modern tools/call's Mcp-Param-* headers with
// the arguments they mirror, per the tool's x-mcp-header annotations (from
// the bridge's cache of the child's tools/list): an intermediary may have
// routed on the header, so the child must not act on a body that says
// otherwise. A header is required when its argument is in the body, and
// refused when it is not.
func (h *handlers) checkParamHeaders(r *http.Request, msg *jsonrpc.Message) *rpcFailure {
	var p struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(msg.Params, &p)
	annotations, err := h.b.ToolHeaders(r.Context(), p.Name)
	if err != nil {
		// The call itself will meet the same trouble and say so.
		h.log.Warn("cannot check Mcp-Param headers: the tool list is unavailable", "tool", p.Name, "err", err)
		return nil
	}
	for _, a := range annotations {
		name := headerParamPrefix + a.Name
		values := r.Header.Values(name)
		sp, found, _ := jsonrpc.Lookup(msg.Params, append([]string{"arguments"}, a.Path...)...)
		var body []byte
		if found {
			body = msg.Params[sp.Start:sp.End]
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
		case len(values) > 1:
			return mismatch("the %s header is sent more than once", name)
		case !headerSafe(values[0]):
			return mismatch("the %s header has characters a header value may not carry; send them as =?base64?...?=", name)
		}
		value, err := headerValue(r, name)
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
		var s string
		return json.Unmarshal(body, &s) == nil && s == header
	case 't', 'f':
		return string(body) == header
	default:
		a, err1 := strconv.ParseFloat(string(body), 64)
		b, err2 := strconv.ParseFloat(header, 64)
		return err1 == nil && err2 == nil && a == b
	}
}
