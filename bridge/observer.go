package bridge

import (
	"context"
	"errors"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// Observer is told what happens in the bridge, for metrics. The bridge
// calls it on its hot paths (MessageRead for every line a child writes),
// at times with its own locks held: its methods must be cheap, must not
// block and must not call the bridge. What can be read from the bridge's
// state at any moment (calls in flight and queued, children up, restarts,
// late answers) is in Status instead, so that it never drifts.
type Observer interface {
	// CallEnded is told once for each request a client gave Call
	// (listens aside), how the call ended as its client saw it; and for
	// each tools/call refused before Call because ToolHeaders failed.
	CallEnded(Ending)
	// Progress is told of each progress notification a child sends, and
	// what became of it.
	Progress(ProgressFate)
	// MessageRead is told of each line a worker's child writes on stdout,
	// with its length in bytes; a line over the size limit counts too.
	MessageRead(worker, size int)
}

// Ending is how a call ended, as its client saw it: one of Endings.
type Ending struct {
	Outcome string
	Reason  string // who cancelled, for OutcomeCancelled; "" otherwise
}

// The outcomes of calls. Those the gateway decides carry the reason word
// of the error the client got.
const (
	OutcomeOK          = "ok"                // the child's result, or the gateway's answer in its stead (ping, initialize)
	OutcomeChildError  = "child_error"       // the child's JSON-RPC error
	OutcomeCancelled   = "cancelled"         // the client left or cancelled; Reason says which
	OutcomeTimeout     = "timeout"           // no answer or progress in time (-32001)
	OutcomeOverloaded  = "overloaded"        // refused: no free slot and no room in the queue, or none in time (-32003)
	OutcomeUnavailable = "child_unavailable" // no child, or it exited during the call (-32000)
	OutcomeTooLarge    = "too_large"         // the child's answer was over the size limit (-32004)
	OutcomeBadAnswer   = "bad_answer"        // the child answered with a message that is not valid JSON-RPC (-32010)
	OutcomeShutdown    = "shutting_down"     // refused or ended because the gateway stops (-32005)
	OutcomeError       = "error"             // another error of the gateway's: a retry it cannot use, a capability the client lacks, ...

	ReasonClientDisconnected = "client_disconnected" // the request's context ended: the client closed its connection, or stopped reading and was cut off
	ReasonClientCancelled    = "client_cancelled"    // a 2025 client's notifications/cancelled, or the end of its session
)

// Endings lists every Ending a call can have.
func Endings() []Ending {
	return []Ending{
		{Outcome: OutcomeOK}, {Outcome: OutcomeChildError},
		{Outcome: OutcomeCancelled, Reason: ReasonClientDisconnected},
		{Outcome: OutcomeCancelled, Reason: ReasonClientCancelled},
		{Outcome: OutcomeTimeout}, {Outcome: OutcomeOverloaded}, {Outcome: OutcomeUnavailable},
		{Outcome: OutcomeTooLarge}, {Outcome: OutcomeBadAnswer}, {Outcome: OutcomeShutdown}, {Outcome: OutcomeError},
	}
}

// ProgressFate is what became of a progress notification from a child.
type ProgressFate string

const (
	ProgressRelayed   ProgressFate = "relayed"   // queued for its call's client
	ProgressCoalesced ProgressFate = "coalesced" // took the place of one its client had not taken yet (see mailbox.note)
	ProgressDropped   ProgressFate = "dropped"   // no call in flight asked for it
)

// ProgressFates lists every ProgressFate.
func ProgressFates() []ProgressFate {
	return []ProgressFate{ProgressRelayed, ProgressCoalesced, ProgressDropped}
}

type noObserver struct{}

func (noObserver) CallEnded(Ending)      {}
func (noObserver) Progress(ProgressFate) {}
func (noObserver) MessageRead(int, int)  {}

// endingOf is how a call that ended with err (nil: with the child's
// answer, an error response when childErr) looks to its client.
func endingOf(err error, childErr bool) Ending {
	e, isRPC := errors.AsType[*jsonrpc.Error](err)
	switch {
	case err == nil && childErr:
		return Ending{Outcome: OutcomeChildError}
	case err == nil:
		return Ending{Outcome: OutcomeOK}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Ending{Outcome: OutcomeCancelled, Reason: ReasonClientDisconnected}
	case !isRPC:
		return Ending{Outcome: OutcomeError}
	}
	switch e.Code {
	case jsonrpc.CodeCancelled:
		return Ending{Outcome: OutcomeCancelled, Reason: ReasonClientCancelled}
	case jsonrpc.CodeTimeout:
		return Ending{Outcome: OutcomeTimeout}
	case jsonrpc.CodeOverloaded:
		return Ending{Outcome: OutcomeOverloaded}
	case jsonrpc.CodeUnavailable:
		return Ending{Outcome: OutcomeUnavailable}
	case jsonrpc.CodeTooLarge:
		return Ending{Outcome: OutcomeTooLarge}
	case jsonrpc.CodeBadAnswer:
		return Ending{Outcome: OutcomeBadAnswer}
	case jsonrpc.CodeShutdown:
		return Ending{Outcome: OutcomeShutdown}
	}
	return Ending{Outcome: OutcomeError}
}

// endedError is the error of a call that has ended, its ending observed
// when it was delivered, before Call could return it; Call unwraps it and
// observes nothing more.
type endedError struct{ error }

func (e endedError) Unwrap() error { return e.error }

func ended(err error) error {
	if _, ok := errors.AsType[endedError](err); err == nil || ok {
		return err
	}
	return endedError{err}
}
