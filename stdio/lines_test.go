package stdio

import (
	"bytes"
	"io"
	"slices"
	"testing"
	"time"
)

// A large line is collected around: once as it begins, when the last
// large line is likely garbage and its memory should take the new one's
// pieces, and once it is read, when its pieces are garbage. A collection
// asked for while one runs is made after it, not dropped.
func TestLargeLinesAreCollectedAround(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	r := newLineReader(pr, 64<<20)
	gcs := make(chan struct{}, 8)
	release := make(chan struct{})
	r.gc = func() {
		gcs <- struct{}{}
		<-release // the collection "runs" until the test lets it end
	}
	waitGC := func(what string) {
		t.Helper()
		select {
		case <-gcs:
		case <-time.After(10 * time.Second):
			t.Fatalf("no collection %s", what)
		}
	}
	lines := make(chan []byte, 1)
	go func() {
		line, err := r.next()
		if err != nil {
			t.Error(err)
		}
		lines <- line
	}()
	piece := bytes.Repeat([]byte("x"), 1<<20)
	for range collectAfter/len(piece) + 1 {
		if _, err := pw.Write(piece); err != nil {
			t.Fatal(err)
		}
	}
	// The line is not complete, and a collection has begun.
	waitGC("as the large line began")
	if _, err := pw.Write(append(piece, '\n')); err != nil {
		t.Fatal(err)
	}
	line := <-lines
	if len(line) != collectAfter+2*len(piece) {
		t.Fatalf("read %d bytes", len(line))
	}
	// The line was read while the first collection still ran: the second
	// comes once it ends.
	select {
	case <-gcs:
		t.Fatal("two collections at once")
	default:
	}
	release <- struct{}{}
	waitGC("once the large line was read")
	release <- struct{}{}
}

// Every line comes with Spare bytes of room after its end, small or
// gathered in pieces, so that a token or id put back in it rarely needs a
// copy of the line; and the room is past the line's end, not in it.
func TestLinesHaveRoomToGrow(t *testing.T) {
	t.Parallel()
	small := []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`)
	long := bytes.Repeat([]byte("y"), 100<<10) // past the bufio buffer: read in pieces
	input := append(append(append(append([]byte{}, small...), "\r\n"...), long...), '\n')
	r := newLineReader(bytes.NewReader(input), 1<<20)
	for _, want := range [][]byte{small, long} {
		line, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(line, want) {
			t.Fatalf("read %.60q..., want %.60q...", line, want)
		}
		if room := cap(line) - len(line); room < Spare {
			t.Errorf("a line of %d bytes has room for %d more, want at least %d", len(line), room, Spare)
		}
	}
}

// A byte order mark before the first line is no part of it; later, one is
// the line's own bytes (and an empty line with only a mark is skipped).
func TestByteOrderMarkOpensTheStream(t *testing.T) {
	for in, want := range map[string][]string{
		"\xEF\xBB\xBF{\"a\":1}\n{\"b\":2}\n":        {`{"a":1}`, `{"b":2}`},
		"\xEF\xBB\xBF\n{\"a\":1}\n\xEF\xBB\xBF{}\n": {`{"a":1}`, "\xEF\xBB\xBF{}"},
		"{\"a\":1}\n\xEF\xBB\xBF{\"b\":2}\n":        {`{"a":1}`, "\xEF\xBB\xBF{\"b\":2}"},
	} {
		r := newLineReader(bytes.NewReader([]byte(in)), 1<<20)
		var got []string
		for {
			line, err := r.next()
			if err != nil {
				break
			}
			got = append(got, string(line))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: lines %q, want %q", in, got, want)
		}
	}
}
