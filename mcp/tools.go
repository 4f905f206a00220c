package mcp

import (
	"strings"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// ParamHeader is one x-mcp-header annotation in a tool's input schema: a
// 2026-07-28 client mirrors the argument at Path into the HTTP header
// Mcp-Param-{Name}, and the gateway checks the two agree.
type ParamHeader struct {
	Name string   // the header is Mcp-Param-{Name}
	Path []string // property names from the arguments object down
	Type string   // string, integer, number or boolean
}

// ParamHeaders finds the annotations of a tool's inputSchema that are
// reachable through properties alone. ok is false when an annotation
// breaks the spec's rules (a name that is not a header token or repeats, a
// type other than a primitive), and then none of the tool's annotations
// may be enforced.
func ParamHeaders(schema []byte) (out []ParamHeader, ok bool) {
	seen := map[string]bool{}
	ok = true
	var walk func(s []byte, path []string)
	walk = func(s []byte, path []string) {
		props := jsonrpc.Get(s, "properties")
		if len(props) == 0 || props[0] != '{' {
			return
		}
		members, err := jsonrpc.Members(props)
		if err != nil {
			return
		}
		for _, m := range members {
			p := props[m.Value.Start:m.Value.End]
			at := append(append([]string{}, path...), m.Key)
			if raw := jsonrpc.Get(p, "x-mcp-header"); raw != nil {
				name, isString := String(raw)
				typ, _ := String(jsonrpc.Get(p, "type"))
				key := strings.ToLower(name)
				switch {
				case !isString || !isToken(name) || seen[key]:
					ok = false
				case typ != "string" && typ != "integer" && typ != "number" && typ != "boolean":
					ok = false
				default:
					seen[key] = true
					out = append(out, ParamHeader{Name: name, Path: at, Type: typ})
				}
			}
			walk(p, at)
		}
	}
	walk(schema, nil)
	return out, ok
}

// isToken reports whether s is an HTTP field-name token (RFC 9110).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
