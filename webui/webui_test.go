package webui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, target string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServesPageAndAssets(t *testing.T) {
	h := Handler()
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", `<script type="module" src="ui/app.js">`}, // relative: the page may sit under a prefix
		{"/ui/app.js", "text/javascript; charset=utf-8", "sseEvents"},
		{"/ui/app.css", "text/css; charset=utf-8", ":focus-visible"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp := get(t, h, http.MethodGet, tc.path, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d, want 200", tc.path, resp.StatusCode)
			}
			if got := resp.Header.Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type %q, want %q", got, tc.contentType)
			}
			if got := body(t, resp); !strings.Contains(got, tc.contains) {
				t.Errorf("GET %s does not contain %q", tc.path, tc.contains)
			}
			checkSecurityHeaders(t, resp)
			if resp.Header.Get("ETag") == "" || resp.Header.Get("Cache-Control") != "no-cache" {
				t.Errorf("ETag %q, Cache-Control %q: want an ETag and no-cache", resp.Header.Get("ETag"), resp.Header.Get("Cache-Control"))
			}

			head := get(t, h, http.MethodHead, tc.path, nil)
			if head.StatusCode != http.StatusOK || body(t, head) != "" {
				t.Errorf("HEAD %s: %d with a body, want 200 without", tc.path, head.StatusCode)
			}
		})
	}
}

func checkSecurityHeaders(t *testing.T, resp *http.Response) {
	t.Helper()
	csp := resp.Header.Get("Content-Security-Policy")
	for _, directive := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
		"media-src 'self' data:", "connect-src 'self'", "form-action 'none'", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, directive+";") && !strings.HasSuffix(csp, directive) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, directive)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy %q allows something unsafe", csp)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options %q, want nosniff", got)
	}
}

func TestRevalidation(t *testing.T) {
	h := Handler()
	first := get(t, h, http.MethodGet, "/ui/app.js", nil)
	etag := first.Header.Get("ETag")
	if !regexp.MustCompile(`^"[A-Za-z0-9_-]+"$`).MatchString(etag) {
		t.Fatalf("ETag %q is not a strong entity tag", etag)
	}
	again := get(t, h, http.MethodGet, "/ui/app.js", http.Header{"If-None-Match": {etag}})
	if again.StatusCode != http.StatusNotModified || body(t, again) != "" {
		t.Errorf("GET with If-None-Match of the current ETag: %d, want 304 without a body", again.StatusCode)
	}
	stale := get(t, h, http.MethodGet, "/ui/app.js", http.Header{"If-None-Match": {`"old"`}})
	if stale.StatusCode != http.StatusOK {
		t.Errorf("GET with a stale If-None-Match: %d, want 200", stale.StatusCode)
	}
	if other := get(t, h, http.MethodGet, "/ui/app.css", nil).Header.Get("ETag"); other == etag {
		t.Errorf("app.js and app.css share the ETag %s", etag)
	}
}

func TestOnlyThePageIsServed(t *testing.T) {
	h := Handler()
	for _, path := range []string{"/ui/", "/ui/index.html", "/ui/webui.go", "/ui/missing.js", "/index.html", "/app.js", "/v1/tools", "/ui/app.js/x", "/ui"} {
		resp := get(t, h, http.MethodGet, path, nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
		checkSecurityHeaders(t, resp)
	}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		if resp := get(t, h, method, "/", nil); resp.StatusCode == http.StatusOK {
			t.Errorf("%s /: 200, want a refusal", method)
		}
	}
}

// The page keeps to its own policy: no inline script or style, nothing
// from another origin, and no HTML parsing of what the gateway sends.
func TestPageKeepsToThePolicy(t *testing.T) {
	h := Handler()
	page := body(t, get(t, h, http.MethodGet, "/", nil))
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`), // a script with inline code
		regexp.MustCompile(`<style`),
		regexp.MustCompile(`\sstyle=`),
		regexp.MustCompile(`\son[a-z]+=`), // inline event handlers
		regexp.MustCompile(`(?:src|href)="(?:https?:)?//`),
	} {
		if m := bad.FindString(page); m != "" {
			t.Errorf("index.html has %q, which the policy forbids", m)
		}
	}
	script := body(t, get(t, h, http.MethodGet, "/ui/app.js", nil))
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "http://", "https://"} {
		if strings.Contains(script, bad) {
			t.Errorf("app.js uses %s", bad)
		}
	}
}
