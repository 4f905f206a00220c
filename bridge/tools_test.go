package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
	"github.com/stdiomcp/gateway/jsonrpc"
)

// The tool list gathers every page, each tool as the child wrote it, and
// is bounded in bytes: past the bound, the list is too large rather than
// kept.
func TestToolListPagesCopiesAndBound(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	fetch := func() <-chan fetched { return fetchTools(context.Background(), w.b) }

	answer := fetch()
	m := child.expect("tools/list")
	pad := strings.Repeat("x", 1<<20)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"_meta":{"pad":"%s"},"tools":[{"name":"a"}],"nextCursor":"p2"}}`, m.ID, pad)
	m = child.expect("tools/list")
	if c := jsonrpc.Get(m.Params, "cursor"); string(c) != `"p2"` {
		t.Errorf("second page asked with %s", m.Params)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"b", "x":1}]}}`, m.ID)
	g := <-answer
	if g.err != nil || len(g.list.Tools) != 2 || strings.Join(g.list.Names, ",") != "a,b" || string(g.list.Tools[1]) != `{"name":"b", "x":1}` {
		t.Fatalf("list %+v, %v", g.list, g.err)
	}

	// The child says its list changed; the next one is too large. Until
	// the bridge has read the change, the list comes from its cache.
	child.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	m = nil
	for m == nil {
		answer = fetch()
		for waiting := true; waiting; {
			select {
			case <-answer:
				waiting = false
			case msg := <-child.got:
				if msg.Method == "tools/list" {
					m, waiting = msg, false
				}
			}
		}
	}
	big := strings.Repeat("y", maxToolListBytes)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"c","d":"%s"}]}}`, m.ID, big)
	g = <-answer
	var e *jsonrpc.Error
	if !errors.As(g.err, &e) || e.Code != jsonrpc.CodeTooLarge {
		t.Errorf("a list over the bound: %v, want code %d", g.err, jsonrpc.CodeTooLarge)
	}
}

// A cursor given twice, or more pages than the bridge reads, ends the list
// where it is, and the log says so. The page that gives a cursor again is
// not kept: a child that always answers the same page and cursor lists its
// tools once.
func TestToolListPagesEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		cursor func(page int) string
		pages  int // the pages the child is asked for
		kept   int // the tools listed, one a page
		logged []string
	}{
		{"a cursor given twice", func(page int) string { return []string{"a", "b", "a"}[page] }, 3, 2,
			[]string{"a cursor it had given before", "the list is cut", "tools=2"}},
		{"always the same cursor", func(int) string { return "0" }, 2, 1,
			[]string{"a cursor it had given before", "the list is cut", "tools=1"}},
		{"no end", func(page int) string { return fmt.Sprintf("p%d", page) }, maxToolPages, maxToolPages,
			[]string{"more pages than the gateway reads", "the list is cut", "pages=100", "tools=100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, child, log := loggedWorld(t)
			answer := make(chan *ToolList, 1)
			go func() {
				l, err := w.b.Tools(context.Background())
				if err != nil {
					t.Error(err)
				}
				answer <- l
			}()
			for page := range tc.pages {
				m := child.expect("tools/list")
				child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"t%d"}],"nextCursor":%q}}`, m.ID, page, tc.cursor(page))
			}
			l := <-answer
			if l == nil {
				t.Fatal("no list")
			}
			if len(l.Tools) != tc.kept {
				t.Fatalf("tools %v, want %d of them", l.Names, tc.kept)
			}
			for _, s := range tc.logged {
				if !strings.Contains(log.String(), s) {
					t.Errorf("the log does not say %q:\n%s", s, log.String())
				}
			}
		})
	}
}

// A child that says its list changed before each answer to tools/list
// does not hold a caller forever: after maxOvertaken fetches, the caller
// takes the last list fetched. That list is not cached: once the child
// stops announcing changes, the next caller gets a fresh list, and the one
// after it the cached one.
func TestToolListChangingWithEveryAnswer(t *testing.T) {
	t.Parallel()
	w, child, _ := loggedWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fetch := func() <-chan fetched { return fetchTools(ctx, w.b) }
	answer := func(m *jsonrpc.Message, name string) {
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":%q}]}}`, m.ID, name)
	}

	want := func(answer <-chan fetched, name string) {
		t.Helper()
		select {
		case g := <-answer:
			if g.err != nil || len(g.list.Names) != 1 || g.list.Names[0] != name {
				t.Fatalf("list %+v, %v; want %s", g.list, g.err, name)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no list; want %s", name)
		}
	}

	storm := fetch()
	for fetches := 0; ; {
		select {
		case g := <-storm:
			if name := fmt.Sprintf("t%d", fetches); g.err != nil || len(g.list.Names) != 1 || g.list.Names[0] != name {
				t.Fatalf("list %+v, %v; want the last one fetched, %s", g.list, g.err, name)
			}
			if fetches > maxOvertaken {
				t.Errorf("the list was fetched %d times for one caller, want at most %d", fetches, maxOvertaken)
			}
		case m := <-child.got:
			if m.Method != "tools/list" {
				continue
			}
			if fetches++; fetches > maxOvertaken+2 {
				t.Fatalf("the list was fetched %d times for one caller and it still waits", fetches)
			}
			child.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			answer(m, fmt.Sprintf("t%d", fetches))
			continue
		case <-time.After(10 * time.Second):
			t.Fatal("no fetch and no list")
		}
		break
	}

	// The storm is over: the next caller fetches afresh; the one after it
	// reads the cache (the child is not asked again, or it would wait).
	calm := fetch()
	answer(child.expect("tools/list"), "calm")
	want(calm, "calm")
	want(fetch(), "calm")
}

// A tools/list result whose tools is not an array is a bad answer, not a
// child without tools; with tools absent or null, the child has none.
func TestToolListThatIsNotAList(t *testing.T) {
	t.Parallel()
	for result, bad := range map[string]bool{
		`{"tools":"notalist"}`: true,
		`{"tools":{"a":1}}`:    true,
		`{"tools":null}`:       false,
		`{}`:                   false,
	} {
		w, child, _ := loggedWorld(t)
		answer := make(chan error, 1)
		go func() {
			l, err := w.b.Tools(context.Background())
			if err == nil && len(l.Tools) != 0 {
				err = fmt.Errorf("%d tools", len(l.Tools))
			}
			answer <- err
		}()
		m := child.expect("tools/list")
		child.send(`{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
		err := <-answer
		var e *jsonrpc.Error
		if got := errors.As(err, &e) && e.Code == jsonrpc.CodeBadAnswer; got != bad || (!bad && err != nil) {
			t.Errorf("%s: %v; want a bad answer: %v", result, err, bad)
		}
	}
}

// loggedWorld is a legacy bridge with one child, whose log the test reads
// (a child that exits is not restarted within an hour); a child answers
// its handshake unless the test says otherwise.
func loggedWorld(t *testing.T, auto ...autoReply) (*world, *fakeChild, *gatewaytest.LockedBuffer) {
	var log gatewaytest.LockedBuffer
	a := autoReply{initialize: true}
	if len(auto) > 0 {
		a = auto[0]
	}
	w := &world{t: t, children: make(chan *fakeChild, 8), auto: a}
	w.b = New(w.start, strict(t, Options{Era: EraLegacy, RestartMin: time.Hour, RestartMax: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&log, nil))}))
	t.Cleanup(func() { w.b.Close(context.Background()) })
	child := <-w.children
	t.Cleanup(child.exit)
	return w, child, &log
}

// An error the child answers with id null (it could not read a request)
// is logged with what it says; and the call it may have been meant for
// still gets its own answer.
func TestErrorWithoutAnIDIsLogged(t *testing.T) {
	t.Parallel()
	w, child, log := loggedWorld(t)
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`)
	m := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error at byte 7"}}`)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, m.ID)
	if _, err := c.wait(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "parse error at byte 7") {
		t.Errorf("the log does not say what the child said:\n%s", log.String())
	}
}

// A child's answer that is not UTF-8 is passed on as written, and the log
// says so, once per child.
func TestNotUTF8IsPassedOnAndSaid(t *testing.T) {
	t.Parallel()
	w, child, log := loggedWorld(t)
	for i := range 2 {
		c := w.call(context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"x"}}`, i))
		m := child.expect("tools/call")
		child.send("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"text\":\"bad \xff\xfe\"}}", m.ID)
		resp, err := c.wait()
		if err != nil || !strings.Contains(string(resp), "bad \xff\xfe") {
			t.Fatalf("answer %q, %v; want the bytes as the child wrote them", resp, err)
		}
	}
	if n := strings.Count(log.String(), "not valid UTF-8"); n != 1 {
		t.Errorf("the log says %d times that a line is not UTF-8, want once:\n%s", n, log.String())
	}
}

// fetched is what a Tools call returned.
type fetched struct {
	list *ToolList
	err  error
}

// fetchTools calls Tools from a goroutine of its own; the channel gives
// what it returned.
func fetchTools(ctx context.Context, b *Bridge) <-chan fetched {
	ch := make(chan fetched, 1)
	go func() {
		l, err := b.Tools(ctx)
		ch <- fetched{l, err}
	}()
	return ch
}
