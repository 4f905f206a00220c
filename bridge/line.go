package bridge

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// maxPooledLine is the largest line buffer kept for reuse: a rare large
// request is not held on to for the next small one.
const maxPooledLine = 64 << 10

// lineBuf returns a buffer to build a line for a child in; freeLineBuf
// takes it back once the line is written, which is the end of its use: a
// Transport keeps no message past WriteMessage.
func (b *Bridge) lineBuf() *[]byte {
	if buf, ok := b.lines.Get().(*[]byte); ok {
		return buf
	}
	return new([]byte)
}

func (b *Bridge) freeLineBuf(buf *[]byte) {
	if cap(*buf) <= maxPooledLine {
		b.lines.Put(buf)
	}
}

// appendLine appends to dst the request as the child gets it under
// exchange id: the gateway's id, the gateway's progress token in place of
// the client's, the _meta a modern child needs for a legacy client, and
// params members set by the gateway (a retry's inputResponses). Every
// other byte is the client's.
func (c *call) appendLine(dst []byte, id int64, set []mcp.Member) []byte {
	if c.internal() {
		return append(dst, jsonrpc.NewRequest(id, c.method, c.params)...)
	}
	req := c.req
	meta := c.caller.Meta
	if !c.caller.Modern && c.ch.eraNow() == EraModern {
		meta = append(mcp.ClientMeta(mcp.Client{Capabilities: c.caller.Capabilities, Info: c.caller.ClientInfo, LogLevel: c.caller.LogLevel}), meta...)
	}
	var more []jsonrpc.Edit
	if meta != nil || set != nil {
		more = mcp.AddMeta(req, meta, set...)
	}
	// The id and token edits live here, never in a slice that could grow
	// onto the heap, and so do the digits they share.
	var num [20]byte
	gw := strconv.AppendInt(num[:0], id, 10)
	var room [2]jsonrpc.Edit
	idSpan, _ := req.IDSpan()
	room[0] = jsonrpc.Edit{Span: idSpan, New: gw}
	ours := room[:1]
	if sp, ok := req.MetaSpan(mcp.MetaProgressToken); ok {
		room[1] = jsonrpc.Edit{Span: sp, New: gw}
		ours = room[:2]
	}
	start := len(dst)
	dst = appendSplice(dst, req.Raw, ours, more)
	if bytes.ContainsAny(dst[start:], "\r\n") {
		// Pretty-printed input: a stdio message must be one line. The body
		// was parsed, so it is valid JSON and compacts.
		var buf bytes.Buffer
		_ = json.Compact(&buf, dst[start:])
		dst = append(dst[:start], buf.Bytes()...)
	}
	return dst
}

// appendSplice appends to dst what jsonrpc.Splice(b, append(x, y...)...)
// returns, without the copies Splice makes: a line for the child costs
// nothing but its bytes. x and y are the caller's, and sorted here, each
// by a stable insertion sort (they are a few edits), then merged, x first
// on a tie: the order a stable sort of the two together gives, as Splice's
// sort does for so few.
func appendSplice(dst, b []byte, x, y []jsonrpc.Edit) []byte {
	sortEdits(x)
	sortEdits(y)
	at := 0
	for len(x) > 0 || len(y) > 0 {
		var e jsonrpc.Edit
		if len(y) == 0 || (len(x) > 0 && x[0].Span.Start <= y[0].Span.Start) {
			e, x = x[0], x[1:]
		} else {
			e, y = y[0], y[1:]
		}
		dst = append(dst, b[at:e.Span.Start]...)
		dst = append(dst, e.New...)
		at = e.Span.End
	}
	return append(dst, b[at:]...)
}

func sortEdits(edits []jsonrpc.Edit) {
	for i := 1; i < len(edits); i++ {
		for j := i; j > 0 && edits[j].Span.Start < edits[j-1].Span.Start; j-- {
			edits[j], edits[j-1] = edits[j-1], edits[j]
		}
	}
}
