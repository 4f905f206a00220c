package deploy

import (
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// auth checks who may call the pods: the gateway listens on every
// interface, so it must have credentials to check, from a Secret or an
// OAuth issuer; it must refuse to start without them rather than serve
// anyone who reaches the port; and no token may be written in the
// manifests, which whoever reads the repository reads too.
func (c *checker) auth(ctr corev1.Container, env map[string]setting) {
	if v := c.value(env, "GATEWAY_REQUIRE_AUTH"); !isTrue(v) {
		c.bad("GATEWAY_REQUIRE_AUTH=%q, want true: a replica that finds no credentials would start and serve anyone", v)
	}
	var authenticated bool
	if s, ok := env["GATEWAY_AUTH_TOKENS"]; ok {
		authenticated = true
		if s.from != "secret" {
			c.bad("GATEWAY_AUTH_TOKENS comes from the %s, not from a Secret: whoever reads the manifests may call", s.from)
		} else {
			c.secretKey("GATEWAY_AUTH_TOKENS", s.secret, s.key)
		}
	}
	if s, ok := env["GATEWAY_AUTH_TOKENS_FILE"]; ok && s.value != "" {
		authenticated = true
		if m, ok := c.secretFile(ctr, "GATEWAY_AUTH_TOKENS_FILE", s.value); ok {
			if m.subPath {
				c.bad("GATEWAY_AUTH_TOKENS_FILE=%s is mounted through a subPath, which the kubelet never updates: changed tokens would need a restart", s.value)
			}
			c.secretKey("the tokens file", m.secret, m.key)
		}
	}
	if c.value(env, "GATEWAY_OAUTH_ISSUER") != "" {
		authenticated = true
	}
	if !authenticated {
		c.bad("no authentication: set GATEWAY_AUTH_TOKENS_FILE on a mounted Secret, GATEWAY_AUTH_TOKENS from a Secret, or GATEWAY_OAUTH_ISSUER")
	}
}

// isTrue reads a boolean setting as the gateway does (strconv.ParseBool,
// through envconfig).
func isTrue(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// Each way of giving the gateway credentials that the auth check names
// passes it, in place of the overlay's tokens file.
func TestClusterAuthAlternatives(t *testing.T) {
	rendered, good := exampleOverlay(t)
	for name, change := range map[string]func(c *corev1.Container){
		"tokens from a secretKeyRef": func(c *corev1.Container) {
			c.Env = append(c.Env, corev1.EnvVar{Name: "GATEWAY_AUTH_TOKENS", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "gateway-auth"}, Key: "tokens"}}})
		},
		"OAuth": func(c *corev1.Container) {
			setEnv(c, "GATEWAY_OAUTH_ISSUER", "https://issuer.example.com")
			setEnv(c, "GATEWAY_OAUTH_RESOURCE", "https://mcp.example.com/mcp")
		},
	} {
		t.Run(name, func(t *testing.T) {
			objs, f := clone(rendered, good)
			c := gatewayContainer(t, objs)
			setEnv(c, "GATEWAY_AUTH_TOKENS_FILE", "")
			change(c)
			if p := checkCluster(objs, f); len(p) > 0 {
				t.Errorf("problems %q, want none", p)
			}
		})
	}
}
