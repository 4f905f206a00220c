package httpapi

import (
	"bytes"
	"net/url"
	"strconv"
	"strings"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// maxSchemaDepth bounds how deep rebase looks for references: each level
// rescans what is below it, and no real schema nests this deep.
const maxSchemaDepth = 256

// rebase returns a schema as it must read once embedded in the document
// at the URI fragment at. In a schema without $id, "#..." resolves
// against the document the schema is in (JSON Schema 2020-12 §8.2.1, as
// OpenAPI 3.1 adopts it), so a tool's "#/$defs/x", which meant its own
// root, would name the document's root: it becomes at+"/$defs/x". A
// plain-name reference ("#addr") becomes the pointer of the subschema
// holding that $anchor, for the many readers that only follow pointers.
// A subschema with an $id of its own is a resource whose references
// already resolve against that $id, so it is left as it is, as is every
// reference that is not a fragment. Only keywords whose values are
// schemas are searched: a "$ref" inside an enum or an example is data.
func rebase(schema []byte, at string) []byte {
	// "$ref" can only be spelled otherwise with a \u escape.
	if !bytes.Contains(schema, []byte("$ref")) && !bytes.Contains(schema, []byte(`\u`)) {
		return schema
	}
	rb := rebaser{src: schema, at: at, anchors: map[string]string{}}
	rb.schema(jsonrpc.Span{Start: 0, End: len(schema)}, "", 0)
	for _, r := range rb.named {
		if ptr, ok := rb.anchors[r.name]; ok {
			rb.edits = append(rb.edits, jsonrpc.Edit{Span: r.span, New: jsonrpc.Quote(at + (&url.URL{Fragment: ptr}).EscapedFragment())})
		}
	}
	if len(rb.edits) == 0 {
		return schema
	}
	return jsonrpc.Splice(schema, rb.edits...)
}

type rebaser struct {
	src     []byte
	at      string
	edits   []jsonrpc.Edit
	anchors map[string]string // $anchor name: the JSON pointer of its subschema
	named   []namedRef        // resolved once every anchor is known
}

type namedRef struct {
	span jsonrpc.Span
	name string
}

// schema looks for references in the schema at sp, whose JSON pointer
// (from the tool's schema) is ptr.
func (rb *rebaser) schema(sp jsonrpc.Span, ptr string, depth int) {
	if depth > maxSchemaDepth || rb.src[sp.Start] != '{' {
		return // too deep, true, false, or not a schema
	}
	members, err := jsonrpc.Members(rb.src[sp.Start:sp.End])
	if err != nil {
		return
	}
	value := func(m jsonrpc.Member) jsonrpc.Span {
		return jsonrpc.Span{Start: sp.Start + m.Value.Start, End: sp.Start + m.Value.End}
	}
	for _, m := range members {
		if m.Key != "$id" {
			continue
		}
		v := value(m)
		id, _ := mcp.String(rb.src[v.Start:v.End])
		if id != "" && id[0] != '#' {
			return // a resource of its own
		}
		if id != "" {
			rb.anchor(id[1:], ptr) // draft-07 spelled an anchor this way
		}
	}
	for _, m := range members {
		v := value(m)
		at := func() string { return ptr + "/" + escapePointer(m.Key) }
		switch m.Key {
		case "$ref":
			rb.ref(v)
		case "$anchor":
			if name, ok := mcp.String(rb.src[v.Start:v.End]); ok {
				rb.anchor(name, ptr)
			}
		// Keywords whose value is a schema, or (items before 2020-12, and
		// the others where they are wrong anyway) an array of them.
		case "additionalProperties", "items", "prefixItems", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
			"contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems", "contentSchema":
			if rb.src[v.Start] != '[' {
				rb.schema(v, at(), depth+1)
				continue
			}
			elems, _ := jsonrpc.Elements(rb.src[v.Start:v.End])
			for i, e := range elems {
				rb.schema(jsonrpc.Span{Start: v.Start + e.Start, End: v.Start + e.End}, at()+"/"+strconv.Itoa(i), depth+1)
			}
		// Keywords whose value maps names to schemas.
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies":
			if rb.src[v.Start] != '{' {
				continue
			}
			subs, _ := jsonrpc.Members(rb.src[v.Start:v.End])
			for _, s := range subs {
				rb.schema(jsonrpc.Span{Start: v.Start + s.Value.Start, End: v.Start + s.Value.End}, at()+"/"+escapePointer(s.Key), depth+1)
			}
		}
	}
}

func (rb *rebaser) ref(v jsonrpc.Span) {
	ref, ok := mcp.String(rb.src[v.Start:v.End])
	if !ok || !strings.HasPrefix(ref, "#") {
		return
	}
	if frag := ref[1:]; frag == "" || frag[0] == '/' {
		rb.edits = append(rb.edits, jsonrpc.Edit{Span: v, New: jsonrpc.Quote(rb.at + frag)})
	} else {
		rb.named = append(rb.named, namedRef{v, frag})
	}
}

func (rb *rebaser) anchor(name, ptr string) {
	if _, taken := rb.anchors[name]; !taken {
		rb.anchors[name] = ptr
	}
}

// escapePointer makes a key one JSON pointer token (RFC 6901).
func escapePointer(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
