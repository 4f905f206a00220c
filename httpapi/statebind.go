package httpapi

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// A requestState is a handle on a call waiting for its client's input.
// Holding one must not be enough to continue the call: when callers
// authenticate, the gateway hands its client a state bound to it,
//
//	gwb1.<owner>.<base64url of the state the client would have had>.<base64url of an HMAC-SHA256 over what precedes>
//
// and takes it back off on the retry, which only its owner can send. The
// child, or the bridge, sees its own state as it made it.
const boundPrefix = "gwb1."

func stateKey(sessionKey []byte) []byte {
	m := hmac.New(sha256.New, sessionKey)
	m.Write([]byte("requestState bound to its caller"))
	return m.Sum(nil)
}

func (h *handlers) bindMAC(key []byte, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// bindState binds the requestState of resp, an input_required result, to
// owner; any other answer passes as it is.
func (h *handlers) bindState(owner string, resp []byte) []byte {
	if !bytes.Contains(resp, []byte(mcp.ResultInputRequired)) {
		return resp // most answers: not worth a scan
	}
	m, err := jsonrpc.Parse(resp)
	if err != nil || m.Result == nil || mcp.ResultType(m.Result) != mcp.ResultInputRequired {
		return resp
	}
	members, err := jsonrpc.Members(m.Result)
	if err != nil {
		return resp
	}
	sp, found, err := jsonrpc.Find(members, mcp.ParamRequestState)
	if err != nil || !found {
		return resp
	}
	state, ok := mcp.String(m.Result[sp.Start:sp.End])
	if !ok {
		return resp
	}
	body := boundPrefix + owner + "." + base64.RawURLEncoding.EncodeToString([]byte(state))
	bound := body + "." + h.bindMAC(h.stateKeys[0], body)
	rs, _ := m.ResultSpan()
	return jsonrpc.Splice(resp, jsonrpc.Edit{Span: shiftSpan(sp, rs.Start), New: jsonrpc.Quote(bound)})
}

// unbindState gives back the request with the state its owner was handed
// replaced by the one the child made. A state that another caller was
// handed, or that was never bound, is refused as one that names nothing:
// the request does not reach the child.
func (h *handlers) unbindState(owner string, req *mcp.Request) (*mcp.Request, *rpcFailure) {
	raw, present := req.Param(mcp.ParamRequestState)
	if !present || string(raw) == "null" {
		return req, nil
	}
	refused := refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams,
		"requestState does not belong to this caller (it was handed to another caller, altered, or issued by a gateway with another GATEWAY_SECRET: another replica, or this one before a restart); send the request again without requestState", nil)
	state, ok := mcp.String(raw)
	if !ok {
		return nil, refused // a child might read a state of another type
	}
	rest, ok := strings.CutPrefix(state, boundPrefix)
	if !ok {
		return nil, refused
	}
	i := strings.LastIndexByte(rest, '.')
	j := strings.IndexByte(rest, '.')
	if i < 0 || j == i {
		return nil, refused
	}
	body, mac := boundPrefix+rest[:i], rest[i+1:]
	valid := false
	for _, key := range h.stateKeys {
		valid = valid || hmac.Equal([]byte(mac), []byte(h.bindMAC(key, body)))
	}
	inner, err := base64.RawURLEncoding.Strict().DecodeString(rest[j+1 : i])
	if !valid || rest[:j] != owner || err != nil {
		return nil, refused
	}
	edited := jsonrpc.Splice(req.Raw, mcp.SetParams(req, []mcp.Member{{Key: mcp.ParamRequestState, Value: jsonrpc.Quote(string(inner))}})...)
	msg, err := jsonrpc.Parse(edited)
	if err != nil {
		return nil, refused // cannot happen: a string replaced a string
	}
	out, err := mcp.Read(msg)
	if err != nil {
		return nil, refused
	}
	return out, nil
}

func shiftSpan(sp jsonrpc.Span, by int) jsonrpc.Span {
	return jsonrpc.Span{Start: sp.Start + by, End: sp.End + by}
}
