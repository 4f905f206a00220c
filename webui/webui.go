// Package webui is the gateway's built-in web page: pick a tool, fill its
// arguments, run it through the REST API (/v1) with a live progress bar,
// cancel it, and see its result. The page is three static files embedded
// in the binary; it has no build step and loads nothing from elsewhere.
package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"net/http"
	"path"
	"time"
)

//go:embed index.html app.js app.css
var files embed.FS

// contentSecurityPolicy lets the page run only its own script and style
// files: no inline code, no other origin, no frames, no forms posting
// anywhere. Images and audio from a tool's result are data: URLs.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"media-src 'self' data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// asset is one embedded file, ready to serve.
type asset struct {
	name        string
	contentType string
	etag        string
	body        []byte
}

// Handler serves the page on GET / and its assets on GET /ui/{file}
// (HEAD too); every other path is 404. Responses carry a strict
// Content-Security-Policy and a strong ETag, and are revalidated on each
// use (Cache-Control: no-cache), so a new gateway version is picked up
// at once while an unchanged file costs a 304.
func Handler() http.Handler {
	contentTypes := map[string]string{
		"index.html": "text/html; charset=utf-8",
		"app.js":     "text/javascript; charset=utf-8",
		"app.css":    "text/css; charset=utf-8",
	}
	byName := make(map[string]*asset, len(contentTypes))
	for name, ct := range contentTypes {
		body, err := files.ReadFile(name)
		if err != nil {
			panic("webui: embedded file missing: " + name) // the go:embed line lists it
		}
		sum := sha256.Sum256(body)
		byName[name] = &asset{name: name, contentType: ct, body: body,
			etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", byName["index.html"])
	mux.HandleFunc("GET /ui/{file}", func(w http.ResponseWriter, r *http.Request) {
		a, ok := byName[r.PathValue("file")]
		if !ok || a.name == "index.html" {
			http.NotFound(w, r)
			return
		}
		a.ServeHTTP(w, r)
	})
	return secure(mux)
}

// secure adds the headers every response of the page gets, 404s included.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

func (a *asset) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache")
	// ServeContent answers If-None-Match, Range and HEAD; a zero modtime
	// leaves Last-Modified out, so the ETag alone decides.
	http.ServeContent(w, r, path.Base(a.name), time.Time{}, bytes.NewReader(a.body))
}
