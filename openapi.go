// Package gateway holds the gateway's contract, openapi.yaml, for the
// binary to serve; the code is in the packages below it.
package gateway

import _ "embed"

//go:embed openapi.yaml
var openAPI []byte

// OpenAPI returns the gateway's own OpenAPI 3.1 document (openapi.yaml), a
// copy the caller may keep or change.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }
