package auth_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/stdiomcp/gateway/auth"
)

const policyJSON = `{
  "tokens":  { "ci": { "tools": ["echo", "add"], "resources": ["demo://static/*"], "prompts": ["*"] },
               "ghost": { "tools": ["*"] } },
  "scopes":  { "mcp:tools": { "tools": ["*"] },
               "mcp:read": { "resources": ["*"], "prompts": ["*"] },
               "mcp:static": { "resources": ["demo://static/*"] } },
  "default": { "tools": ["echo"] }
}`

// records keeps log records, to check that a warning was given.
type records struct {
	mu   sync.Mutex
	list []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.list = append(r.list, rec)
	r.mu.Unlock()
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) warned(attr, value string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.list {
		found := false
		rec.Attrs(func(a slog.Attr) bool {
			found = found || a.Key == attr && a.Value.String() == value
			return true
		})
		if rec.Level == slog.LevelWarn && found {
			return true
		}
	}
	return false
}

func TestPolicy(t *testing.T) {
	is := newIssuer(t)
	c := newClock()
	path := filepath.Join(t.TempDir(), "policy.json")
	writeFile(t, path, policyJSON)
	logs := &records{}
	a := oauthAuth(t, is, c, func(o *auth.Options) {
		o.Tokens = []string{"ci:tok-0123456789ab-ci", "other:tok-0123456789ab-other"}
		o.PolicyFile = path
		o.Logger = slog.New(logs)
	})
	if !logs.warned("names", "ghost") {
		t.Error("no warning about the policy naming a token that is not loaded")
	}
	jwtWith := func(scope string) auth.Identity {
		cl := good(is, c)
		cl.Scope = scope
		id, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", cl))
		if e != nil {
			t.Fatal(e)
		}
		return id
	}
	token := func(tok string) auth.Identity {
		id, e := authErr(t, a, "Bearer "+tok)
		if e != nil {
			t.Fatal(e)
		}
		return id
	}
	type check struct {
		k     auth.Kind
		name  string
		allow bool
	}
	for _, tc := range []struct {
		who          string
		id           auth.Identity
		unrestricted bool
		checks       []check
	}{
		{"token with an entry", token("tok-0123456789ab-ci"), false, []check{
			{auth.Tool, "echo", true}, {auth.Tool, "add", true}, {auth.Tool, "ad", false}, {auth.Tool, "rm", false},
			{auth.Resource, "demo://static/a/b", true}, {auth.Resource, "demo://static/", true},
			{auth.Resource, "demo://static", false}, {auth.Resource, "demo://staticx/a", false},
			{auth.Prompt, "anything", true},
		}},
		{"token without an entry gets the default", token("tok-0123456789ab-other"), false, []check{
			{auth.Tool, "echo", true}, {auth.Tool, "add", false}, {auth.Resource, "demo://static/a", false}, {auth.Prompt, "p", false},
		}},
		{"union of scopes", jwtWith("mcp:tools mcp:read"), true, []check{
			{auth.Tool, "rm", true}, {auth.Resource, "file:///etc/passwd", true}, {auth.Prompt, "p", true},
		}},
		{"one scope, no default added", jwtWith("mcp:read"), false, []check{
			{auth.Tool, "echo", false}, {auth.Resource, "x://y", true},
		}},
		{"narrow and wide scope together", jwtWith("mcp:static mcp:tools"), false, []check{
			{auth.Tool, "x", true}, {auth.Resource, "demo://static/1", true}, {auth.Resource, "demo://dynamic/1", false}, {auth.Prompt, "p", false},
		}},
		{"unknown scopes get the default", jwtWith("profile email"), false, []check{
			{auth.Tool, "echo", true}, {auth.Tool, "add", false},
		}},
	} {
		if got := tc.id.Rules.Unrestricted(); got != tc.unrestricted {
			t.Errorf("%s: Unrestricted %v", tc.who, got)
		}
		for _, ch := range tc.checks {
			if got := tc.id.Rules.Allows(ch.k, ch.name); got != ch.allow {
				t.Errorf("%s: Allows(%v, %q) = %v, want %v", tc.who, ch.k, ch.name, got, ch.allow)
			}
		}
	}

	for _, tc := range []struct {
		k    auth.Kind
		name string
		want string
	}{
		{auth.Tool, "add", `scope="mcp:tools"`},
		{auth.Resource, "demo://static/x", `scope="mcp:read mcp:static"`},
		{auth.Resource, "file:///x", `scope="mcp:read"`},
		{auth.Prompt, "welcome_prompt", `scope="mcp:read"`},
	} {
		got := a.Forbidden(tc.k, tc.name)
		if !strings.HasPrefix(got, `Bearer realm="mcp", error="insufficient_scope", `) || !strings.Contains(got, tc.want) ||
			!strings.HasSuffix(got, `, resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`) {
			t.Errorf("Forbidden(%v, %q) = %s, want %s", tc.k, tc.name, got, tc.want)
		}
		if strings.Contains(got, tc.name) {
			t.Errorf("Forbidden repeats the requested name: %s", got)
		}
	}

	// Without a default, an unlisted caller may use nothing; the reload
	// applies to the very next call.
	writeFile(t, path, `{"tokens": {"ci": {"tools": ["echo"]}}}`)
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if id := token("tok-0123456789ab-other"); id.Rules.Allows(auth.Tool, "echo") || id.Rules.Allows(auth.Prompt, "") {
		t.Error("a caller with no entry and no default was allowed something")
	}
	if id := token("tok-0123456789ab-ci"); !id.Rules.Allows(auth.Tool, "echo") || id.Rules.Allows(auth.Tool, "add") {
		t.Error("the reloaded policy is not in force")
	}
	if got := a.Forbidden(auth.Tool, "add"); strings.Contains(got, "scope=") {
		t.Errorf("no scope allows it, yet the challenge names some: %s", got)
	}
}

func TestNoPolicyAllowsEverything(t *testing.T) {
	a, err := auth.New(auth.Options{Tokens: []string{"tok-0123456789ab-aaaa"}})
	if err != nil {
		t.Fatal(err)
	}
	id, e := authErr(t, a, "Bearer tok-0123456789ab-aaaa")
	if e != nil || !id.Rules.Unrestricted() || !id.Rules.Allows(auth.Resource, "any://thing") {
		t.Fatalf("identity %+v, error %v", id, e)
	}
	if !auth.All().Unrestricted() || (auth.Rules{}).Allows(auth.Tool, "") || (auth.Rules{}).Unrestricted() {
		t.Fatal("All or the zero Rules are wrong")
	}
	if got := a.Forbidden(auth.Tool, "x"); got != `Bearer realm="mcp", error="insufficient_scope", error_description="this caller may not use this tool"` {
		t.Fatalf("Forbidden without OAuth: %s", got)
	}
}

func TestPolicyRefused(t *testing.T) {
	dir := t.TempDir()
	for i, tc := range []struct{ name, body, want string }{
		{"not JSON", `{"tokens": `, "unexpected EOF"},
		{"unknown top-level member", `{"defaults": {"tools": ["*"]}}`, `unknown field "defaults"`},
		{"unknown rule member", `{"tokens": {"ci": {"tool": ["*"]}}}`, `unknown field "tool"`},
		{"member twice", `{"default": {"tools": ["a"], "tools": ["*"]}}`, `"tools" appears twice`},
		{"member twice by letter case", `{"default": {"tools": ["a"]}, "Default": {"tools": ["*"]}}`, `"Default" appears twice`},
		{"data after the object", `{} {}`, "data after"},
		{"bad token name", `{"tokens": {"a b": {}}}`, "not a token name"},
		{"bad scope", `{"scopes": {"a\"b": {}}}`, "not a scope"},
		{"empty pattern", `{"default": {"prompts": [""]}}`, "empty pattern"},
		{"wrong type", `{"default": {"tools": "*"}}`, "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "p"+string(rune('a'+i)))
			writeFile(t, path, tc.body)
			_, err := auth.New(auth.Options{Tokens: []string{"tok-0123456789ab-aaaa"}, PolicyFile: path})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestMetadataAndChallenge(t *testing.T) {
	is := newIssuer(t)
	a := oauthAuth(t, is, newClock(), func(o *auth.Options) { o.OAuth.Scopes = []string{"mcp:tools", "mcp:read"} })
	paths, body, ok := a.Metadata()
	if !ok || !slices.Equal(paths, []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"}) {
		t.Fatalf("paths %q ok %v", paths, ok)
	}
	var md map[string]any
	if err := json.Unmarshal(body, &md); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"resource":                 resource,
		"authorization_servers":    []any{is.URL()},
		"bearer_methods_supported": []any{"header"},
		"scopes_supported":         []any{"mcp:tools", "mcp:read"},
	}
	if got, _ := json.Marshal(md); string(got) != string(must(json.Marshal(want))) {
		t.Fatalf("metadata %s, want %s", got, must(json.Marshal(want)))
	}

	const rm = `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`
	_, missing := authErr(t, a, "")
	if got := a.Challenge(missing); got != `Bearer realm="mcp", `+rm {
		t.Errorf("challenge without credentials: %s", got)
	}
	_, bad := authErr(t, a, "Bearer nope")
	if got := a.Challenge(bad); got != `Bearer realm="mcp", error="invalid_token", error_description="the token is not valid", `+rm {
		t.Errorf("challenge for a bad token: %s", got)
	}

	plain, err := auth.New(auth.Options{Tokens: []string{"tok-0123456789ab-aaaa"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := plain.Metadata(); ok {
		t.Error("metadata without OAuth")
	}
	if got := plain.Challenge(missing); got != `Bearer realm="mcp"` {
		t.Errorf("challenge without OAuth: %s", got)
	}

	root := oauthAuth(t, is, newClock(), func(o *auth.Options) { o.OAuth.Resource = "https://mcp.example.com" })
	if paths, _, _ := root.Metadata(); !slices.Equal(paths, []string{"/.well-known/oauth-protected-resource"}) {
		t.Errorf("paths for a resource without a path: %q", paths)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestNewRefusesBadOAuth(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*auth.OAuth)
		want string
	}{
		{"alg none", func(o *auth.OAuth) { o.Algorithms = []string{"RS256", "none"} }, `"none" is refused`},
		{"HS256", func(o *auth.OAuth) { o.Algorithms = []string{"HS256"} }, "HMAC"},
		{"hs384 in lower case", func(o *auth.OAuth) { o.Algorithms = []string{"hs384"} }, "HMAC"},
		{"unknown algorithm", func(o *auth.OAuth) { o.Algorithms = []string{"RS1"} }, "not supported"},
		{"empty algorithm list", func(o *auth.OAuth) { o.Algorithms = []string{} }, "no OAuth algorithm"},
		{"missing resource", func(o *auth.OAuth) { o.Resource = "" }, "needs the resource URL"},
		{"http issuer", func(o *auth.OAuth) { o.Issuer = "http://auth.example.com" }, "must use https"},
		{"issuer with a query", func(o *auth.OAuth) { o.Issuer = "https://auth.example.com/?x=1" }, "query"},
		{"resource with a fragment", func(o *auth.OAuth) { o.Resource = "https://mcp.example.com/mcp#x" }, "fragment"},
		{"relative resource", func(o *auth.OAuth) { o.Resource = "/mcp" }, "not an absolute URL"},
		{"http JWKS URL", func(o *auth.OAuth) { o.JWKSURL = "http://auth.example.com/jwks" }, "must use https"},
		{"negative leeway", func(o *auth.OAuth) { o.Leeway = -1 }, "negative"},
		{"bad scope", func(o *auth.OAuth) { o.Scopes = []string{"a b"} }, "not a scope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := auth.OAuth{Issuer: "https://auth.example.com", Resource: resource}
			tc.edit(&o)
			_, err := auth.New(auth.Options{OAuth: &o})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestResourceURIsCannotEscapeAPattern: '*' matches '/', so without the
// check "demo://a*" would cover demo://a/../b/secret, which a child that maps
// URIs to files reads as b/secret.
func TestResourceURIsCannotEscapeAPattern(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.json")
	writeFile(t, path, `{"tokens": {
		"ci":  {"resources": ["demo://a*", "DEMO://Static.Example/Docs/*", "file:///srv/*", "test://template/*"]},
		"all": {"resources": ["*"]}}}`)
	a, err := auth.New(auth.Options{Tokens: []string{"ci:tok-0123456789ab-ci", "all:tok-0123456789ab-all"}, PolicyFile: path})
	if err != nil {
		t.Fatal(err)
	}
	ci, e := authErr(t, a, "Bearer tok-0123456789ab-ci")
	if e != nil {
		t.Fatal(e)
	}
	all, e := authErr(t, a, "Bearer tok-0123456789ab-all")
	if e != nil {
		t.Fatal(e)
	}
	for _, tc := range []struct {
		uri  string
		want bool
	}{
		{"demo://a/b", true},
		{"demo://abc", true},
		{"demo://a/..b", true},
		{"demo://a/../b/secret", false},
		{"demo://a/./b", false},
		{"demo://a/%2e%2e/b", false},
		{"demo://a/%2E%2E/b", false},
		{"demo://a%2f..%2fb", false},
		{"demo://a%5C..%5Cb", false},
		{`demo://a\..\b`, false},
		{"demo://a/b\x00.txt", false},
		{"demo://a/b%00.txt", false},
		{"demo://a/b\r\nc", false},
		{"demo://a/..?x=1", false},
		// Scheme and host by any letter case, the path exactly.
		{"DEMO://a/b", true},
		{"Demo://A/b", true},
		{"demo://static.example/Docs/x", true},
		{"demo://STATIC.EXAMPLE/Docs/x", true},
		{"demo://static.example/docs/x", false},
		// Templates listed by resources/templates/list go through the same
		// check and still pass.
		{"file:///srv/{path}", true},
		{"file:///srv/{+path}", true},
		{"test://template/{id}/data", true},
		{"file:///srv/../etc/{path}", false},
	} {
		if got := ci.Rules.Allows(auth.Resource, tc.uri); got != tc.want {
			t.Errorf("Allows(resource, %q) = %v, want %v", tc.uri, got, tc.want)
		}
	}
	// A caller allowed every resource is not second-guessed, and the check is
	// for resources only.
	if !all.Rules.Allows(auth.Resource, "demo://a/../b") || !auth.All().Allows(auth.Resource, "demo://a/%2e%2e/b") {
		t.Error("a caller allowed every resource was refused one")
	}
}

func TestForbiddenMethod(t *testing.T) {
	is := newIssuer(t)
	path := filepath.Join(t.TempDir(), "policy.json")
	writeFile(t, path, policyJSON)
	a := oauthAuth(t, is, newClock(), func(o *auth.Options) { o.PolicyFile = path })
	const method = "custom/method"
	got := a.ForbiddenMethod(method)
	want := `Bearer realm="mcp", error="insufficient_scope", error_description="this caller may use only the tools, resources and prompts its policy names, not other methods", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`
	if got != want {
		t.Errorf("ForbiddenMethod with OAuth:\n%s\nwant\n%s", got, want)
	}
	// The policy's scopes grant every tool, which is no reason to suggest
	// them for a method (Forbidden for a tool would).
	if strings.Contains(got, "scope=") || strings.Contains(got, method) || !strings.Contains(a.Forbidden(auth.Tool, ""), "scope=") {
		t.Errorf("ForbiddenMethod names a scope or the method: %s", got)
	}
	plain, err := auth.New(auth.Options{Tokens: []string{"tok-0123456789ab-aaaa"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.ForbiddenMethod(method); got != `Bearer realm="mcp", error="insufficient_scope", error_description="this caller may use only the tools, resources and prompts its policy names, not other methods"` {
		t.Errorf("ForbiddenMethod without OAuth: %s", got)
	}
}

// above reports whether a record at level or above has an attribute
// whose value contains text.
func (r *records) above(level slog.Level, text string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.list {
		found := false
		rec.Attrs(func(a slog.Attr) bool {
			found = found || strings.Contains(a.Value.String(), text)
			return true
		})
		if rec.Level >= level && found {
			return true
		}
	}
	return false
}
