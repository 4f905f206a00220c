package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
)

// The floor of an idle stream: what a bare net/http handler that holds an
// SSE answer open costs per stream, in a process of its own (the floor
// server's /hold), so that the gateway's figure has something to be
// compared with. Whatever net/http keeps for a connection and its handler
// (buffers, two goroutines) no server built on it can go below.

// serveHold is the floor's /hold: one event, then nothing until the client
// goes.
func serveHold(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":0}}\n\n"))
	if http.NewResponseController(w).Flush() != nil {
		return
	}
	<-r.Context().Done()
}

// idleFloor opens n streams on the floor's /hold, openers at a time, each
// read up to its first event, and reports the floor's VmRSS before and
// with them all open; then closes them.
func idleFloor(ctx context.Context, self string, n, openers int) (before, after int64, err error) {
	s, err := startServer(ctx, floorTarget(self), nil)
	if err != nil {
		return 0, 0, err
	}
	defer s.stop()
	if before, err = statusField(s.pid(), "VmRSS:"); err != nil {
		return 0, 0, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	conns := make([]net.Conn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hold","arguments":{"tag":"floor"},"_meta":{"progressToken":1}}}`
	req := "POST /hold HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for range max(openers, 1) {
		wg.Go(func() {
			for i := range next {
				c, err := openHold(ctx, addr, req)
				mu.Lock()
				conns[i] = c
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return before, 0, fmt.Errorf("the floor's streams: %w", err)
	}
	after, err = statusField(s.pid(), "VmRSS:")
	return before, after, err
}

// openHold sends req on a new connection and reads up to the end of the
// first event.
func openHold(ctx context.Context, addr, req string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte(req)); err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(c, 512)
	blank := 0 // the blank line that ends the headers, then the event's
	for blank < 2 {
		line, err := br.ReadSlice('\n')
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("reading the floor's stream: %w", err)
		}
		if len(line) <= 2 {
			blank++
		}
	}
	return c, nil
}
