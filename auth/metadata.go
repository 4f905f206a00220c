package auth

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// wellKnown is RFC 9728's well-known suffix for Protected Resource Metadata.
const wellKnown = "/.well-known/oauth-protected-resource"

// metadata is the Protected Resource Metadata, built once in New.
type metadata struct {
	paths []string // where the gateway serves it
	url   string   // the absolute URL for resource_metadata in challenges
	body  []byte
}

func newMetadata(o OAuth) (metadata, error) {
	u, err := url.Parse(o.Resource)
	if err != nil {
		return metadata{}, err
	}
	// RFC 9728 §3.1: the well-known segment goes between the host and the
	// resource's path, so /mcp is described at /.well-known/.../mcp. The root
	// form is served too, for clients that only try that one.
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	m := metadata{
		paths: []string{wellKnown + path},
		url:   u.Scheme + "://" + u.Host + wellKnown + path,
	}
	if path != "" {
		m.paths = append(m.paths, wellKnown)
	}
	doc := struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
		ScopesSupported        []string `json:"scopes_supported,omitempty"`
	}{o.Resource, []string{o.Issuer}, []string{"header"}, o.Scopes}
	if m.body, err = json.Marshal(doc); err != nil {
		return metadata{}, err
	}
	return m, nil
}

// Metadata returns the RFC 9728 Protected Resource Metadata and the paths to
// serve it on; ok is false when OAuth is off. The body is shared: do not
// modify it.
func (a *Authenticator) Metadata() (paths []string, body []byte, ok bool) {
	if a.verifier == nil {
		return nil, nil, false
	}
	return append([]string(nil), a.meta.paths...), a.meta.body, true
}

// Challenge returns the WWW-Authenticate value for a 401 (or a 400 for
// invalid_request). With no error code (no credentials were sent) it carries
// no error parameters, as RFC 6750 §3.1 asks; with OAuth on it points at the
// metadata, which is how an MCP client finds the authorization server.
func (a *Authenticator) Challenge(e *Error) string {
	var b strings.Builder
	b.WriteString(`Bearer realm="mcp"`)
	if e != nil && e.Code != "" {
		param(&b, "error", e.Code)
		if e.Description != "" {
			param(&b, "error_description", e.Description)
		}
	}
	if a.meta.url != "" {
		param(&b, "resource_metadata", a.meta.url)
	}
	return b.String()
}

// Forbidden returns the WWW-Authenticate value for a 403: the caller is
// known but its rules do not allow the named item. With OAuth on, scope lists
// the scopes whose policy would allow it, so a client can ask for them (step-
// up authorization). The item's name is not repeated: it comes from the
// request and has no business in a header.
func (a *Authenticator) Forbidden(k Kind, name string) string {
	var b strings.Builder
	b.WriteString(`Bearer realm="mcp"`)
	param(&b, "error", "insufficient_scope")
	param(&b, "error_description", "this caller may not use this "+k.String())
	if a.verifier != nil {
		if scopes := a.state.Load().policy.allowingScopes(k, name); len(scopes) > 0 {
			param(&b, "scope", strings.Join(scopes, " "))
		}
		param(&b, "resource_metadata", a.meta.url)
	}
	return b.String()
}

// ForbiddenMethod returns the WWW-Authenticate value for a 403 on a method
// the policy cannot name (anything other than using a tool, a resource or a
// prompt), which only a caller with no restriction may send. It has no scope
// parameter: the policy grants tools, resources and prompts, not methods,
// so no scope is the one to ask for. The method is taken so that the call
// reads as what it refuses, and is not repeated: it comes from the request
// and has no business in a header.
func (a *Authenticator) ForbiddenMethod(method string) string {
	var b strings.Builder
	b.WriteString(`Bearer realm="mcp"`)
	param(&b, "error", "insufficient_scope")
	param(&b, "error_description", "this caller may use only the tools, resources and prompts its policy names, not other methods")
	if a.verifier != nil {
		param(&b, "resource_metadata", a.meta.url)
	}
	return b.String()
}

// param appends an auth-param as a quoted-string (RFC 9110 §5.6.4).
func param(b *strings.Builder, name, value string) {
	b.WriteString(", ")
	b.WriteString(name)
	b.WriteString(`="`)
	for i := 0; i < len(value); i++ {
		if c := value[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(value[i])
	}
	b.WriteByte('"')
}

func loopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// checkURL accepts an absolute https URL, or http for a loopback host (a
// local issuer in tests and development), with no user info, query or
// fragment. Tokens name the issuer and resource by exact string, so the
// configured values are used as given, never normalised.
func checkURL(s, what string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%s %q: %w", what, s, err)
	}
	switch {
	case u.Host == "" || u.Opaque != "":
		return fmt.Errorf("%s %q is not an absolute URL", what, s)
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("%s %q may not have user info, a query or a fragment", what, s)
	case u.Scheme == "https":
	case u.Scheme == "http" && loopback(u.Hostname()):
	default:
		return fmt.Errorf("%s %q must use https (http only for localhost)", what, s)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return fmt.Errorf("%s %q has a character a URL cannot carry unescaped", what, s)
		}
	}
	return nil
}
