package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
)

// Kind is what a rule names.
type Kind int

const (
	Tool Kind = iota
	Resource
	Prompt
)

func (k Kind) String() string {
	switch k {
	case Tool:
		return "tool"
	case Resource:
		return "resource"
	case Prompt:
		return "prompt"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Rules is what one caller may use. The zero Rules allow nothing, so a caller
// whose rules were never resolved is refused rather than let through. Rules
// are values that are never changed after they are built: an Identity may keep
// them while the policy is reloaded.
type Rules struct {
	tools, resources, prompts patterns
}

// patterns is one kind's list. all is set when the list holds a bare "*", so
// the common "everything" case needs no matching and Unrestricted can tell.
type patterns struct {
	all  bool
	list []string
}

// All returns rules that allow everything: what every caller gets when there
// is no policy file.
func All() Rules {
	p := patterns{all: true}
	return Rules{tools: p, resources: p, prompts: p}
}

// Allows reports whether the rules allow the named tool, resource (by URI) or
// prompt. Unless every resource is allowed, a URI that could climb out of
// the tree a pattern names is refused (see unsafeURI), and the URI's scheme
// and host are compared without regard to letter case.
func (r Rules) Allows(k Kind, name string) bool {
	p := r.of(k)
	if p.all {
		return true
	}
	if k == Resource {
		if unsafeURI(name) {
			return false
		}
		name = lowerOrigin(name, false)
	}
	for _, pat := range p.list {
		if match(pat, name) {
			return true
		}
	}
	return false
}

// Unrestricted reports whether every kind is allowed without limit. Only then
// may a caller use methods the gateway cannot attribute to a tool, resource or
// prompt (custom or future methods), since no rule could have been checked.
func (r Rules) Unrestricted() bool {
	return r.tools.all && r.resources.all && r.prompts.all
}

func (r Rules) of(k Kind) patterns {
	switch k {
	case Tool:
		return r.tools
	case Resource:
		return r.resources
	case Prompt:
		return r.prompts
	}
	return patterns{}
}

// union allows what either allows. It builds new slices so that neither
// operand's backing arrays, shared with the policy, are ever written.
func (r Rules) union(o Rules) Rules {
	u := func(a, b patterns) patterns {
		if a.all || b.all {
			return patterns{all: true}
		}
		return patterns{list: slices.Concat(a.list, b.list)}
	}
	return Rules{tools: u(r.tools, o.tools), resources: u(r.resources, o.resources), prompts: u(r.prompts, o.prompts)}
}

// match reports whether name matches pat, in which only '*' is special: it
// matches any run of characters, '/' included, so "demo://static/*" covers a
// whole tree of URIs. Greedy with one backtrack point, which is linear enough
// for names and patterns of a few hundred bytes.
func match(pat, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pat) && pat[p] == '*':
			star, mark = p, n
			p++
		case p < len(pat) && pat[p] == name[n]:
			p++
			n++
		case star >= 0:
			// Let the last '*' swallow one more byte and retry from there.
			mark++
			p, n = star+1, mark
		default:
			return false
		}
	}
	for p < len(pat) && pat[p] == '*' {
		p++
	}
	return p == len(pat)
}

// policy is a parsed policy file. A nil *policy means no policy file: every
// authenticated caller may use everything.
type policy struct {
	tokens   map[string]Rules
	scopes   map[string]Rules
	def      Rules
	hasDef   bool
	scopeIDs []string // the keys of scopes, sorted, for Forbidden's stable output
}

type ruleSpec struct {
	Tools     []string `json:"tools"`
	Resources []string `json:"resources"`
	Prompts   []string `json:"prompts"`
}

type policySpec struct {
	Tokens  map[string]ruleSpec `json:"tokens"`
	Scopes  map[string]ruleSpec `json:"scopes"`
	Default *ruleSpec           `json:"default"`
}

// parsePolicy reads a policy file. Unknown members are refused, and so are
// members repeated in one object (also by letter case, which encoding/json
// would fold together): a typo must not silently widen or narrow what callers
// may do.
func parsePolicy(data []byte) (*policy, error) {
	if err := checkDuplicates(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var spec policySpec
	if err := dec.Decode(&spec); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the policy object")
	}
	p := &policy{tokens: map[string]Rules{}, scopes: map[string]Rules{}}
	for name, rs := range spec.Tokens {
		if !validName(name) {
			return nil, fmt.Errorf("tokens: %q is not a token name (letters, digits, '.', '_', '-')", name)
		}
		r, err := rs.compile()
		if err != nil {
			return nil, fmt.Errorf("tokens.%s: %w", name, err)
		}
		p.tokens[name] = r
	}
	for scope, rs := range spec.Scopes {
		if !validScope(scope) {
			return nil, fmt.Errorf("scopes: %q is not a scope (RFC 6749 §3.3)", scope)
		}
		r, err := rs.compile()
		if err != nil {
			return nil, fmt.Errorf("scopes.%s: %w", scope, err)
		}
		p.scopes[scope] = r
		p.scopeIDs = append(p.scopeIDs, scope)
	}
	sort.Strings(p.scopeIDs)
	if spec.Default != nil {
		r, err := spec.Default.compile()
		if err != nil {
			return nil, fmt.Errorf("default: %w", err)
		}
		p.def, p.hasDef = r, true
	}
	return p, nil
}

func (s ruleSpec) compile() (Rules, error) {
	one := func(kind string, list []string) (patterns, error) {
		var p patterns
		for _, pat := range list {
			if pat == "" {
				return patterns{}, fmt.Errorf("%s: an empty pattern", kind)
			}
			if pat == "*" {
				p.all = true
			}
		}
		if !p.all {
			p.list = slices.Clone(list)
		}
		if kind == "resources" {
			for i, pat := range p.list {
				p.list[i] = lowerOrigin(pat, true)
			}
		}
		return p, nil
	}
	var r Rules
	var err error
	if r.tools, err = one("tools", s.Tools); err != nil {
		return Rules{}, err
	}
	if r.resources, err = one("resources", s.Resources); err != nil {
		return Rules{}, err
	}
	if r.prompts, err = one("prompts", s.Prompts); err != nil {
		return Rules{}, err
	}
	return r, nil
}

// forToken resolves a static token's rules: its own entry, else the default,
// else nothing.
func (p *policy) forToken(name string) Rules {
	if p == nil {
		return All()
	}
	if r, ok := p.tokens[name]; ok {
		return r
	}
	return p.def
}

// forScopes resolves a JWT's rules: the union over the scopes it carries that
// the policy names, else the default, else nothing.
func (p *policy) forScopes(scopes []string) Rules {
	if p == nil {
		return All()
	}
	var r Rules
	found := false
	for _, s := range scopes {
		if sr, ok := p.scopes[s]; ok {
			r, found = r.union(sr), true
		}
	}
	if !found {
		return p.def
	}
	return r
}

// allowingScopes lists the scopes whose rules allow the named item, for the
// scope parameter of an insufficient_scope challenge.
func (p *policy) allowingScopes(k Kind, name string) []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, s := range p.scopeIDs {
		if p.scopes[s].Allows(k, name) {
			out = append(out, s)
		}
	}
	return out
}

// warnUnknownTokens logs policy entries for token names that no loaded token
// has. That is not an error: the tokens file may be rotated before or after
// the policy, and refusing either would make the order of two edits matter.
func (p *policy) warnUnknownTokens(log *slog.Logger, known map[string]bool) {
	if p == nil {
		return
	}
	var unknown []string
	for name := range p.tokens {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		log.Warn("auth policy names tokens that are not loaded", "names", strings.Join(unknown, ","))
	}
}

// validScope reports whether s is an RFC 6749 scope-token, which also makes it
// safe inside a quoted-string of a WWW-Authenticate header.
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c == '"' || c == '\\' || c > 0x7e {
			return false
		}
	}
	return true
}

// checkDuplicates walks the JSON tokens and refuses an object that names a
// member twice, exactly or by letter case.
func checkDuplicates(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object bool
		key    bool // the next token in an object is a key
		seen   map[string]bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k := strings.ToLower(tok.(string))
			if top.seen[k] {
				return fmt.Errorf("member %q appears twice in one object", tok.(string))
			}
			top.seen[k] = true
			top.key = false
			continue
		}
		if top != nil && top.object {
			top.key = true // this token is a value; a key comes next
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, key: true, seen: map[string]bool{}})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}
