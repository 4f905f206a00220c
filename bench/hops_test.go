package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// The bare hops deliver every line, in order, each timed on the machine's
// monotonic clock.
func TestBareHops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const events, every = 30, 2 * time.Millisecond
	l, err := bareHops(ctx, testSelf(t), events, every)
	if err != nil {
		t.Fatal(err)
	}
	if l.N != events || len(l.Samples) != events {
		t.Fatalf("%d samples (%d kept), want %d", l.N, len(l.Samples), events)
	}
	if l.Samples[0] <= 0 || l.P50 < l.Samples[0] || l.P99 < l.P50 {
		t.Fatalf("samples from %v, p50 %v, p99 %v", l.Samples[0], l.P50, l.P99)
	}
}

// Lines missing, repeated or not stamps fail the hops, rather than
// hanging them or counting as fast.
func TestBareHopsReportWhatIsWrong(t *testing.T) {
	for _, c := range []struct{ sent, want string }{
		{"", "0 lines of 3"},
		{"1\n2\n", "2 lines of 3"},
		{"1\n1\n3\n", `"1\n" is not a stamp`},
		{"1\nx\n3\n", `"x\n" is not a stamp`},
		{fmt.Sprint(monoNow()+int64(time.Hour)) + "\n", "is not a stamp"},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err == nil {
				conn.Write([]byte(c.sent))
				conn.Close()
			}
		}()
		_, err = readHops(ln, 3, time.Millisecond)
		ln.Close()
		<-sent
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error saying %q", c.sent, err, c.want)
		}
	}
}

// Arguments the hops' processes cannot use are refused.
func TestHopsRefuseBadArguments(t *testing.T) {
	for _, args := range [][]string{{"0", "1ms"}, {"3", "0s"}, {"x", "1ms"}, {"3"}} {
		if err := serveHopsWriter(args); err == nil {
			t.Errorf("hops-writer %q: no error", args)
		}
	}
	if err := serveHopsRelay([]string{"127.0.0.1:1"}); err == nil {
		t.Error("hops-relay with one argument: no error")
	}
}

// A relay that ends before it connects is reported at once, with how it
// ended, rather than after the wait for its connection.
func TestBareHopsWithoutARelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Waited out, the error would be the accept's timeout.
	_, err := bareHops(ctx, "/bin/false", 3, time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "the hops' relay: exit status 1") {
		t.Fatalf("%v, want the relay's exit", err)
	}
}
