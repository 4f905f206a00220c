package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
)

// minSecretBytes is the shortest GATEWAY_SECRET accepted: the keys derived
// from it are HMAC-SHA256 keys, which want 32 bytes of entropy.
const minSecretBytes = 32

// keys are what the gateway signs with. Each use has a key of its own,
// derived from the one secret, so that nothing one signs (a session id)
// can ever pass for another (a requestState). The keys derived from
// GATEWAY_SECRET_ACCEPT are accepted, never signed with: replicas change
// their secret without refusing what the others signed.
type keys struct {
	session      []byte
	requestState []byte
	accepted     struct{ session, requestState []byte } // nil: none
	shared       bool                                   // from GATEWAY_SECRET(_FILE), rather than random
}

// loadKeys derives the keys from GATEWAY_SECRET or GATEWAY_SECRET_FILE;
// without either, from a random secret that lives as long as the process.
func loadKeys(cfg Config) (keys, error) {
	secret, err := readSecret(cfg.Secret, cfg.SecretFile, "GATEWAY_SECRET")
	if err != nil {
		return keys{}, err
	}
	accept, err := readSecret(cfg.SecretAccept, cfg.SecretAcceptFile, "GATEWAY_SECRET_ACCEPT")
	if err != nil {
		return keys{}, err
	}
	k := keys{shared: secret != nil}
	if secret == nil {
		if accept != nil {
			return keys{}, errors.New("GATEWAY_SECRET_ACCEPT needs GATEWAY_SECRET (or its _FILE): a key to sign with")
		}
		secret = make([]byte, minSecretBytes)
		_, _ = rand.Read(secret) // crypto/rand.Read never fails (Go 1.24+)
	}
	k.session = derive(secret, "2025 session id")
	k.requestState = derive(secret, "requestState")
	if accept != nil {
		k.accepted.session = derive(accept, "2025 session id")
		k.accepted.requestState = derive(accept, "requestState")
	}
	return k, nil
}

// readSecret reads the secret the variable name (or name_FILE) gives, or
// nil when neither is set.
func readSecret(value, file, name string) ([]byte, error) {
	// A value pasted or mounted from a file often ends in a newline; the
	// same secret given either way must make the same keys.
	secret, from := strings.TrimSpace(value), name
	switch {
	case value != "" && file != "":
		return nil, fmt.Errorf("set %s or %s_FILE, not both", name, name)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%s_FILE: %w", name, err)
		}
		secret, from = strings.TrimSpace(string(b)), name+"_FILE "+file
		if secret == "" {
			return nil, fmt.Errorf("%s is empty", from)
		}
	case secret == "":
		return nil, nil
	}
	if len(secret) < minSecretBytes {
		return nil, fmt.Errorf("%s has %d bytes; it needs at least %d (for example: openssl rand -base64 32)", from, len(secret), minSecretBytes)
	}
	return []byte(secret), nil
}

func derive(secret []byte, use string) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("stdiomcp gateway key: " + use))
	return mac.Sum(nil)
}
