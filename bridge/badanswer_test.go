package bridge

import (
	"context"
	"testing"
)

// A line that is not JSON fails no call when it may be a request of the
// child's own (a method, before or after where it goes wrong), or when the
// id it names cannot be read one way only: the call goes on to its own
// answer.
func TestAnswerNotJSONMisattributesNothing(t *testing.T) {
	t.Parallel()
	for name, line := range map[string]string{
		"method first":         `{"jsonrpc":"2.0","id":%s,"method":"sampling/createMessage","params":{"v":NaN}}`,
		"method after":         `{"jsonrpc":"2.0","id":%s,"result":{"v":NaN},"method":"x"}`,
		"method in other case": `{"jsonrpc":"2.0","id":%s,"Method":"x","result":{"v":NaN}}`,
		"params, no result":    `{"jsonrpc":"2.0","id":%s,"params":{"v":NaN}}`,
		"id twice":             `{"jsonrpc":"2.0","id":999,"id":%s,"result":{"v":NaN}}`,
		"id twice, then":       `{"jsonrpc":"2.0","id":%s,"id":999,"result":{"v":NaN}}`,
		"id in other case":     `{"jsonrpc":"2.0","ID":999,"id":%s,"result":{"v":NaN}}`,
		"id after the error":   `{"jsonrpc":"2.0","result":{"v":NaN},"id":%s}`,
		"id again after it":    `{"jsonrpc":"2.0","id":%s,"result":NaN,"id":99}`,
		"ID after it":          `{"jsonrpc":"2.0","id":%s,"result":NaN,"ID":99}`,
		"cut short":            `{"jsonrpc":"2.0","id":%s,"result":{"g":1}`,
		"valid, id twice":      `{"jsonrpc":"2.0","id":%s,"id":999,"result":{}}`,
		"valid, method twice":  `{"jsonrpc":"2.0","id":%s,"method":"a","method":"b"}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, legacy(), autoReply{initialize: true})
			child := w.child()
			c := w.call(context.Background(), `{"jsonrpc":"2.0","id":"k","method":"tools/call"}`)
			m := child.expect("tools/call")
			child.send(line, m.ID)
			child.send(`{"jsonrpc":"2.0","id":%s,"result":{"ok":true}}`, m.ID)
			if resp, err := c.wait(); err != nil || !contains(resp, `"ok":true`) {
				t.Fatalf("call got %s, %v; want the child's answer", resp, err)
			}
		})
	}
}
