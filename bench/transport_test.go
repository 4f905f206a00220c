package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The load client reuses connections, and a call on one the server closed
// while it was idle goes again on a new one instead of failing.
func TestRawTransportReusesAndRetries(t *testing.T) {
	closed := make(chan struct{}, 16)
	var dials atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			dials.Add(1)
		case http.StateClosed:
			closed <- struct{}{}
		}
	}
	srv.Start()
	defer srv.Close()
	client := &http.Client{Transport: &rawTransport{}}
	call := func(body string) {
		t.Helper()
		resp, err := client.Post(srv.URL+"/x?y=1", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != body {
			t.Fatalf("%d %q", resp.StatusCode, b)
		}
	}
	call(`{"a":1}`)
	call(`{"a":2}`)
	if n := dials.Load(); n != 1 {
		t.Errorf("%d connections for two calls in a row, want 1", n)
	}
	// The server drops its idle connection; the next call still works.
	srv.CloseClientConnections()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not close the connection")
	}
	call(`{"a":3}`)
	if n := dials.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (one after the server closed the first)", n)
	}
	// A call whose context ends while it waits returns at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
	if _, err := client.Do(req); err == nil {
		t.Error("a cancelled call succeeded")
	}
}
