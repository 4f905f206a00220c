package httpapi

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/stdiomcp/gateway/clientlimit"
	"github.com/stdiomcp/gateway/detach"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// Limiter holds per-client limits; *clientlimit.Limiter is one.
type Limiter interface {
	// Allow takes one call from key's budget, or says how long until
	// there is one.
	Allow(key string) (ok bool, retryAfter time.Duration)
	// Refund gives back a token Allow took, for a request that turned out
	// to owe none.
	Refund(key string)
	// Open counts a request key has open until release; ok is false when
	// key has as many open as it may.
	Open(key string) (release func(), ok bool)
}

// clientKey names the client a limit counts against: the caller's name
// when it authenticated (one token used from many addresses is one
// client), its address otherwise.
func (h *handlers) clientKey(r *http.Request) string {
	if c := callerOf(r.Context()); c.authenticated {
		return c.who()
	}
	return "addr:" + network(clientlimit.Addr(r, h.opts.TrustedProxies))
}

// network is the part of an address one client holds: an IPv6 client is
// given a /64 at least, and every address in it, so each is one client; an
// IPv4 address is its own.
func network(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is6() {
		return addr
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// cost is what a request costs its client against its limits; the
// costs of messages are in the order of what they take.
type cost int

const (
	// costNothing: an answer to a question the gateway relayed, or a
	// notification the gateway keeps from the child (mcp.KeptFromServer).
	// The client owes it to a call or a session already counted, and a
	// limit that refused it would hold that call up: a question waits
	// for its answer while its call holds the client's last place, and a
	// client that cannot cancel a call cannot free one either.
	costNothing cost = iota
	// costToken: a token of the client's rate, and no place among its
	// open requests: a message that is over once taken (a notification
	// the child is sent, DELETE /mcp). What reaches the child is paid
	// for, so that a client cannot flood it with notifications.
	costToken
	// costCall: a token, and a place among the client's open requests
	// until its answer is sent.
	costCall
	// costOfMessage: what a POST /mcp costs is known once its body is
	// read: the handler applies it (see admitMessage).
	costOfMessage
)

// costOf is what a message of kind and method costs its client; a batch
// costs what the dearest of the messages it serves does (see batch).
func costOf(kind jsonrpc.Kind, method string) cost {
	switch {
	case kind == jsonrpc.KindRequest:
		return costCall
	case kind == jsonrpc.KindNotification && !mcp.KeptFromServer(method):
		return costToken
	}
	return costNothing
}

// limit refuses, with 429, a client over its rate or with too many
// requests open, charging each request c; it runs after authentication,
// so that it keys on who the caller is. With costOfMessage it only notes
// that the handler is to charge the request once it has read its message.
func (h *handlers) limit(c cost) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if h.opts.Limiter == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			aw := accessWriterOf(w)
			if aw == nil {
				// Not under accessLog, as every route New makes is: the
				// request pays as a call at once, and its place is given
				// back as it ends.
				release, ok := h.charge(w, r, costCall)
				if !ok {
					return
				}
				defer detach.Later(w, release)
				next.ServeHTTP(w, r)
				return
			}
			if c == costOfMessage {
				// Charged once the body says what it is (admitMessage).
				// Meanwhile the body holds a token and a place, if the
				// client has them, so that it has no more bodies read at
				// once than it may have requests open, nor more a second
				// than its rate; a client without may still send an
				// answer or a notification, in a smaller body.
				aw.limitsDue = true
				key := h.clientKey(r)
				aw.limitKey = key
				if ok, wait := h.opts.Limiter.Allow(key); ok {
					aw.tookToken = true
				} else {
					aw.overRate, aw.rateWait = true, wait
				}
				if place, ok := h.opts.Limiter.Open(key); ok {
					aw.place = place
				} else {
					aw.atLimit = true
				}
			} else if place, ok := h.charge(w, r, c); ok {
				aw.place = place
			} else {
				return
			}
			// A place, if the request takes one, is given back as the
			// answer leaves (see answering), else as the request ends: a
			// client gone, a panic, no answer at all.
			defer func() {
				if aw.limitsDue && aw.tookToken {
					// Never charged: a body that held no message costs
					// nothing.
					h.opts.Limiter.Refund(aw.limitKey)
				}
				if detach.Left(w) {
					detach.Later(w, aw.givePlaceBack) // a closure only for a stream that left
					return
				}
				aw.givePlaceBack()
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// admitMessage charges w's request c, the cost of the message its body
// holds, when its route left that to the handler (costOfMessage), or
// answers 429 and reports false. It is asked once the message is parsed,
// before anything is done for it; what else calls the handler (a batch's
// parts, admitted by the batch) has nothing due.
func (h *handlers) admitMessage(w http.ResponseWriter, r *http.Request, c cost) bool {
	aw := accessWriterOf(w)
	if aw == nil || !aw.limitsDue {
		return true
	}
	aw.limitsDue = false
	key := aw.limitKey
	switch {
	case c != costNothing && aw.overRate:
		aw.givePlaceBack()
		h.tooMany(w, r, key, aw.rateWait)
		return false
	case c == costCall && aw.atLimit:
		if aw.tookToken {
			h.opts.Limiter.Refund(key) // refused: it took nothing
		}
		h.tooManyOpen(w, r, key)
		return false
	case c == costCall:
		return true // it keeps the token and the place its body held
	}
	aw.givePlaceBack() // it holds no place
	if c == costNothing && aw.tookToken {
		h.opts.Limiter.Refund(key) // nor a token
	}
	return true
}

// atLimitBodyBytes bounds the body of a POST /mcp from a client with no
// place free, or over its rate (see limit): an answer to a question, or a
// notification, which it may still send, is small; a request from it is
// refused.
const atLimitBodyBytes = 1 << 20

// bodyLimit is the most of r's body read: GATEWAY_MAX_BODY_BYTES, less
// for a client at its limit of open requests or over its rate.
func (h *handlers) bodyLimit(w http.ResponseWriter) int64 {
	if aw := accessWriterOf(w); aw != nil && (aw.atLimit || aw.overRate) {
		return min(h.opts.MaxBodyBytes, atLimitBodyBytes)
	}
	return h.opts.MaxBodyBytes
}

// charge takes c from the client's limits, with place giving back the
// place a call holds (nil for what takes none), or answers 429 on w and
// reports false.
func (h *handlers) charge(w http.ResponseWriter, r *http.Request, c cost) (place func(), ok bool) {
	if c == costNothing {
		return nil, true
	}
	key := h.clientKey(r)
	if ok, wait := h.opts.Limiter.Allow(key); !ok {
		h.tooMany(w, r, key, wait)
		return nil, false
	}
	if c == costToken {
		return nil, true
	}
	place, ok = h.opts.Limiter.Open(key)
	if !ok {
		h.tooManyOpen(w, r, key)
		return nil, false
	}
	return place, true
}

// answering gives back the place w's request holds among its client's
// open requests, if it holds one, as its answer leaves: what writes a
// request's answer (a JSON body, a stream's response event, a batch's
// last answer) calls it before the answer can reach the client. A client
// that has read its answer may send its next request at once (an SDK
// takes a stream's response event for the end of the call, not the
// stream's end after it) and must not find it refused for the one it is
// done with. A place is given back once, whichever comes first: this, or
// the request's end.
func answering(w http.ResponseWriter) {
	for {
		switch x := w.(type) {
		case *accessWriter:
			x.givePlaceBack()
			return
		case *batchPart:
			x.givePlaceBack()
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}

// tooManyOpen answers a client with as many requests open as it may.
func (h *handlers) tooManyOpen(w http.ResponseWriter, r *http.Request, key string) {
	// On the access line, with the 429: a flood must not double the log.
	noteRefusal(r, "refused", "too_many_streams", "limit_key", key)
	h.opts.Meter.Refused("too_many_streams")
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusTooManyRequests, nil, tooManyOpenError())
}

func tooManyOpenError() *jsonrpc.Error {
	return jsonrpc.GatewayError(jsonrpc.CodeRateLimited, "too_many_streams",
		"this client has as many requests open as it may; close one or wait for one to finish")
}

// rateLimitedError is the error of a call over its client's rate, which
// may be tried again in after seconds.
func rateLimitedError(after string) *jsonrpc.Error {
	return jsonrpc.GatewayError(jsonrpc.CodeRateLimited, "rate_limited", "too many calls from this client; retry after "+after+"s")
}

// tooMany answers a client over its rate; more says more of why, for the
// access line.
func (h *handlers) tooMany(w http.ResponseWriter, r *http.Request, key string, wait time.Duration, more ...any) {
	noteRefusal(r, append([]any{"refused", "rate_limited", "limit_key", key}, more...)...)
	h.opts.Meter.Refused("rate_limited")
	after := clientlimit.RetryAfterSeconds(wait)
	w.Header().Set("Retry-After", after)
	writeError(w, http.StatusTooManyRequests, nil, rateLimitedError(after))
}

// writeLast writes body, a request's whole answer, giving the request's
// place back before its last byte (see answering): the client has the
// answer only with that byte, and one slow to take a large answer holds
// its place while it is sent. timeout is writeTimed's.
func writeLast(w http.ResponseWriter, body []byte, timeout time.Duration) {
	last := max(len(body)-1, 0)
	_ = writeTimed(w, timeout, body[:last])
	answering(w)
	_, _ = w.Write(body[last:])
}
