package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
)

// catalog is what the REST API knows of the child's tools, built from one
// tool list: which are read-only, their input schemas compiled (each on
// first use), the generated OpenAPI document. A new list (another digest)
// replaces it whole.
type catalog struct {
	digest [sha256.Size]byte
	list   *bridge.ToolList
	tools  map[string]*toolEntry

	mu   sync.Mutex
	docs map[string]*toolsDoc // by the digest of the names in it; "" for all
}

// toolsDoc is one generated document, built once however many ask.
type toolsDoc struct {
	once sync.Once
	doc  []byte
	err  error
}

// maxDocs bounds the documents kept per list: each set of tools that
// callers' policies allow gets one.
const maxDocs = 64

// document returns the OpenAPI document of tools (those named by key, a
// digest), building it on first need.
func (c *catalog) document(key string, tools []json.RawMessage) ([]byte, error) {
	c.mu.Lock()
	d := c.docs[key]
	if d == nil {
		d = &toolsDoc{}
		if c.docs == nil || len(c.docs) >= maxDocs {
			c.docs = map[string]*toolsDoc{}
		}
		c.docs[key] = d
	}
	c.mu.Unlock()
	d.once.Do(func() { d.doc, d.err = toolsDocument(tools, "Tools of the MCP server behind this gateway") })
	return d.doc, d.err
}

type toolEntry struct {
	raw      json.RawMessage
	readOnly bool

	once   sync.Once
	schema *jsonschema.Schema // nil: not checked by the gateway (none, or it would not compile)

	namesOnce sync.Once
	names     *declaredNames
}

// declaredNames are the property names a tool's input schema declares, at
// any depth.
type declaredNames struct {
	names    map[string]bool
	byFold   map[string][]string // the names, by foldName
	together map[[2]string]bool  // pairs (pairOf) of names that differ only by letter case, declared by one object
}

// catalogs keeps the catalog of the last list seen.
type catalogs struct {
	mu   sync.Mutex
	last *catalog
	log  *slog.Logger
}

func (cs *catalogs) of(list *bridge.ToolList) *catalog {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.last != nil && cs.last.digest == list.Digest {
		return cs.last
	}
	c := &catalog{digest: list.Digest, list: list, tools: make(map[string]*toolEntry, len(list.Tools))}
	for i, raw := range list.Tools {
		name := list.Names[i]
		if _, dup := c.tools[name]; dup || name == "" {
			continue // the first of a name is the one a call reaches
		}
		c.tools[name] = &toolEntry{raw: raw, readOnly: string(jsonrpc.Get(raw, "annotations", "readOnlyHint")) == "true"}
	}
	cs.last = c
	return c
}

// inputSchema returns the tool's compiled input schema. A schema that does
// not compile is logged once and left to the child to enforce: the
// gateway must not refuse calls a working server would take.
func (cs *catalogs) inputSchema(name string, t *toolEntry) *jsonschema.Schema {
	t.once.Do(func() {
		raw := jsonrpc.Get(t.raw, "inputSchema")
		if len(raw) == 0 {
			return
		}
		s, err := compileSchema(raw)
		if err != nil {
			cs.log.Warn("a tool's inputSchema does not compile; its arguments are left to the server to check", "tool", name, "err", err)
			return
		}
		t.schema = s
	})
	return t.schema
}

// noLoader refuses every reference outside the schema itself: a tool's
// schema must not make the gateway read files or fetch URLs.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema %s: only references within the tool's own schema are followed", url)
}

// compileSchema compiles a tool's input schema as JSON Schema 2020-12
// (MCP's default dialect), or the draft its $schema names when the library
// knows it.
func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("reading the schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const loc = "urn:stdiomcp:tool-input-schema"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("adding the schema: %w", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("compiling the schema: %w", err)
	}
	return s, nil
}

// errSchemaCheck is a schema check that failed in itself, not the
// arguments.
var errSchemaCheck = errors.New("the schema check failed")

// maxArgumentErrors bounds the errors a problem lists.
const maxArgumentErrors = 20

// validateArguments checks args against s; the failures, each with its
// path in the arguments, or nil when they pass.
func validateArguments(s *jsonschema.Schema, args []byte) (failures []argumentError, err error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return nil, fmt.Errorf("reading the arguments: %w", err)
	}
	defer func() {
		// The library panics on some inputs (math/big refusing a number);
		// the call is refused, the gateway goes on.
		if p := recover(); p != nil {
			failures, err = nil, fmt.Errorf("%w: %v", errSchemaCheck, p)
		}
	}()
	err = s.Validate(v)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, fmt.Errorf("validating the arguments: %w", err)
	}
	out := leafErrors(ve, message.NewPrinter(language.English), nil)
	if len(out) == 0 {
		out = append(out, argumentError{Path: "", Message: ve.Error()})
	}
	return out, nil
}

// leafErrors lists the failures at the leaves of a validation error (the
// nodes above them only say that a part failed), at most
// maxArgumentErrors. A member that is missing, or not allowed, is pointed
// at by its own path, so that a form can mark the field.
func leafErrors(ve *jsonschema.ValidationError, p *message.Printer, out []argumentError) []argumentError {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			out = leafErrors(c, p, out)
		}
		return out
	}
	at := pointer(ve.InstanceLocation)
	var members []string
	// The message of each member's own error says that member alone: each
	// is listed apart, under its own path.
	var each func(string) jsonschema.ErrorKind
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		members = k.Missing
		each = func(m string) jsonschema.ErrorKind { return &kind.Required{Missing: []string{m}} }
	case *kind.AdditionalProperties:
		members = k.Properties
		each = func(m string) jsonschema.ErrorKind { return &kind.AdditionalProperties{Properties: []string{m}} }
	}
	if len(members) == 0 {
		members = []string{""}
	}
	for _, m := range members {
		if len(out) == maxArgumentErrors {
			break
		}
		path, msg := at, ve.ErrorKind
		if m != "" {
			path += "/" + escapePointer(m)
			msg = each(m)
		}
		e := argumentError{Path: path, Message: msg.LocalizedString(p)}
		if !slices.Contains(out, e) { // branches of anyOf may fail alike
			out = append(out, e)
		}
	}
	return out
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapePointer(t))
	}
	return b.String()
}

// declared returns the property names a tool's input schema declares.
func (cs *catalogs) declared(t *toolEntry) *declaredNames {
	t.namesOnce.Do(func() {
		d := &declaredNames{names: map[string]bool{}, byFold: map[string][]string{}, together: map[[2]string]bool{}}
		var schema any
		if err := json.Unmarshal(jsonrpc.Get(t.raw, "inputSchema"), &schema); err == nil {
			d.collect(schema, 0)
		}
		t.names = d
	})
	return t.names
}

func (d *declaredNames) collect(v any, depth int) {
	if depth > maxDepth {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok {
			folds := map[string][]string{}
			for name := range props {
				f := foldName(name)
				for _, other := range folds[f] {
					d.together[pairOf(name, other)] = true
				}
				folds[f] = append(folds[f], name)
				if !d.names[name] {
					d.names[name] = true
					d.byFold[f] = append(d.byFold[f], name)
				}
			}
		}
		for _, sub := range v {
			d.collect(sub, depth+1)
		}
	case []any:
		for _, sub := range v {
			d.collect(sub, depth+1)
		}
	}
}
