package httpapi

import "testing"

// A stream is what the client asked for by name and weighs at least as
// high as JSON.
func TestWantsStream(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                    false,
		"*/*":                                 false,
		"application/json":                    false,
		"text/event-stream":                   true,
		"text/event-stream;q=0":               false,
		"application/json, text/event-stream": true,
		"text/event-stream;q=0.5, application/json;q=0.9": false,
		"text/event-stream, */*;q=0.1":                    true,
		"text/*":                                          false,
		"text/event-stream;q=x":                           false,
	} {
		if got := wantsStream(accept); got != want {
			t.Errorf("%q: %v, want %v", accept, got, want)
		}
	}
}
