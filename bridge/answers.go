package bridge

import (
	"encoding/json"
	"slices"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// answerInitialize answers a legacy client's initialize from what the
// gateway learned of the child: the child is shared and already initialized,
// so the request is never forwarded.
func (s *session) answerInitialize(req *jsonrpc.Message) (*Call, error) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(req.Params, &p) // a missing or odd version gets the latest
	version := legacyVersions[0]
	if slices.Contains(legacyVersions, p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	result := map[string]json.RawMessage{}
	if s.initResult != nil {
		if err := json.Unmarshal(s.initResult, &result); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the child's InitializeResult is not an object"}
		}
	} else {
		// A modern child: the same facts come from its DiscoverResult.
		d := s.discovered()
		result["capabilities"] = orEmpty(d.Capabilities)
		if d.Instructions != nil {
			result["instructions"] = d.Instructions
		}
		result["serverInfo"] = d.Meta[metaServerInfo]
		if result["serverInfo"] == nil {
			result["serverInfo"], _ = json.Marshal(s.b.clientInfo())
		}
	}
	result["protocolVersion"], _ = json.Marshal(version)
	out, err := json.Marshal(result)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	return answered(req, out), nil
}

type discoverFacts struct {
	Capabilities json.RawMessage            `json:"capabilities"`
	Instructions json.RawMessage            `json:"instructions"`
	Meta         map[string]json.RawMessage `json:"_meta"`
}

func (s *session) discovered() discoverFacts {
	var d discoverFacts
	_ = json.Unmarshal(s.discoverResult, &d)
	return d
}

// answerDiscover answers server/discover for a legacy child, from its
// InitializeResult: a modern client gets the same facts in the 2026-07-28
// shape. The caching hint is "do not cache", as for every translated result.
func (s *session) answerDiscover(req *jsonrpc.Message) (*Call, error) {
	var init struct {
		Capabilities json.RawMessage `json:"capabilities"`
		Instructions json.RawMessage `json:"instructions"`
		ServerInfo   json.RawMessage `json:"serverInfo"`
	}
	_ = json.Unmarshal(s.initResult, &init)
	result := map[string]json.RawMessage{
		"resultType":        json.RawMessage(`"complete"`),
		"supportedVersions": json.RawMessage(`["` + ModernVersion + `"]`),
		"capabilities":      orEmpty(init.Capabilities),
		"ttlMs":             json.RawMessage("0"),
		"cacheScope":        json.RawMessage(`"private"`),
	}
	if init.Instructions != nil {
		result["instructions"] = init.Instructions
	}
	if init.ServerInfo != nil {
		meta, _ := json.Marshal(map[string]json.RawMessage{metaServerInfo: init.ServerInfo})
		result["_meta"] = meta
	}
	out, err := json.Marshal(result)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	return answered(req, out), nil
}

func orEmpty(b json.RawMessage) json.RawMessage {
	if b == nil {
		return json.RawMessage("{}")
	}
	return b
}
