package mcp

import (
	"slices"
	"strings"
	"testing"
)

func TestCreatedTask(t *testing.T) {
	for result, want := range map[string]string{
		`{"resultType":"task","taskId":"t-1","status":"working","ttlMs":null}`: "t-1",
		`{"taskId":"t-2","resultType":"task"}`:                                 "t-2",
		`{"task":{"taskId":"t-3","status":"working","ttl":60000},"_meta":{}}`:  "t-3",
		`{"resultType":"task","taskId":"t\u002d4"}`:                            "t-4",
		`{"resultType":"complete","taskId":"not-a-task"}`:                      "",
		`{"content":[{"type":"text","text":"{\"task\":{\"taskId\":\"t\"}}"}]}`: "",
		`{"task":"t-5"}`:                   "",
		`{"resultType":"task","taskId":5}`: "",
		`[]`:                               "",
		`{"resultType":"task","taskId":"big","pad":"` + strings.Repeat("x", 70<<10) + `"}`: "",
	} {
		id, ok := CreatedTask([]byte(result))
		if id != want || ok != (want != "") {
			t.Errorf("CreatedTask(%.80s) = %q, %v; want %q", result, id, ok, want)
		}
	}
}

func TestListenTaskIDs(t *testing.T) {
	for notes, want := range map[string][]string{
		`{"taskIds":["a","b"],"toolsListChanged":true}`: {"a", "b"},
		`{"taskIds":["a",7,"c"]}`:                       {"a", "c"},
		`{"taskIds":"a"}`:                               nil,
		`{"toolsListChanged":true}`:                     nil,
		``:                                              nil,
	} {
		if got := ListenTaskIDs([]byte(notes)); !slices.Equal(got, want) {
			t.Errorf("ListenTaskIDs(%s) = %q, want %q", notes, got, want)
		}
	}
}
