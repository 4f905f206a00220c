package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// Notify handles a notification from a caller. Those that only make sense
// between one client and one server are absorbed: the child is shared, its
// handshake is the gateway's, and a caller's cancellation or progress cannot
// name anything the child knows. Anything else is forwarded as it is.
func (b *Bridge) Notify(ctx context.Context, n *jsonrpc.Message) error {
	switch n.Method {
	case "notifications/cancelled", "notifications/progress",
		"notifications/initialized", "notifications/roots/list_changed":
		b.log.Debug("absorbed a client notification", "method", n.Method)
		return nil
	}
	s, err := b.readySession(ctx)
	if err != nil {
		return err
	}
	line := n.Raw
	if bytes.ContainsAny(line, "\r\n") {
		var buf bytes.Buffer
		if err := json.Compact(&buf, line); err != nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: err.Error()}
		}
		line = buf.Bytes()
	}
	if err := s.t.WriteMessage(ctx, line); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errUnavailable(fmt.Sprintf("could not send the notification to the child: %v", err))
	}
	return nil
}
