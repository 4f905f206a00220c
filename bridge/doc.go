// Package bridge multiplexes many clients' JSON-RPC requests onto stdio MCP
// children.
//
// Every request gets a gateway-allocated id that is never reused; the
// client's id and progress token are put back on the way out, byte for
// byte. A client that goes away is retired at once and the child is told
// with notifications/cancelled. The bridge speaks to children of either MCP
// era, restarts a child that exits, and spreads calls over a pool of
// children.
//
// # Layout
//
// From the front to the child:
//
//   - Bridge (bridge.go, pool.go) is the one type callers use: it picks a
//     worker for each call, holds the slots and the queue, and owns what the
//     workers share (the id counter, the questions).
//   - worker (worker.go) keeps one child running: start, handshake
//     (handshake.go), readiness, restart with backoff, wedge detection
//     (watchdog.go).
//   - child (child.go, read.go) is one child process from start to exit: its
//     transport, the table of exchanges pending on it, and the one goroutine
//     that reads it.
//   - exchange (exchange.go) is one request as the child sees it, under a
//     gateway id, from its write until the child answers or is told to
//     cancel.
//   - call (call.go, mailbox.go) is one request as its client sees it (the
//     Call interface): one exchange, or several in a row when a 2026 child
//     needs input from a 2025 client. line.go writes the request as each
//     exchange sends it.
//   - questions (questions.go, park.go, inputs.go) are the child's questions
//     for clients in the middle of a call, and the calls parked for a 2026
//     client's retry.
//   - listen.go, logs.go, tools.go: subscriptions/listen, log routing, the
//     x-mcp-header cache.
//   - observer.go: what the bridge tells its Observer (how calls end, what
//     becomes of progress, each line read), for metrics.
//
// # How a call ends
//
// A call ends exactly once. Every ending first claims the call
// (call.claim, under call.mu) and only the winner delivers the end to the
// client (call.deliver); delivering twice is a bug, reported through
// Options.OnInternalError. call.deliver also tells the Observer how a
// client's call ended; Bridge.Call tells it of a request refused before a
// call was made. The verbs:
//
//   - end: claim and deliver; reports false when another ending came first.
//   - answer: the child's response, taken from the pending table by the
//     reader, ends the call.
//   - abort: the call ends without the child's response (the client left,
//     cancelled or timed out, or the request could not be written): its
//     exchange is retired, then the child is told, unless it never got the
//     request.
//   - fail: the child is gone (it exited, was killed, or the gateway stops):
//     every pending exchange is taken at once and each call ends with an
//     error.
//   - park: a 2025 child asked a 2026 client something; the call ends with
//     an InputRequiredResult while its exchange stays pending.
//   - resume: the client's retry takes over a parked exchange.
//   - abandon: a parked exchange whose retry never came is retired and
//     cancelled.
//   - retire: take an exchange out of the pending table, so that a late
//     answer is dropped. It is part of an ending, never an ending by
//     itself. One that may have reached the child stays "unsettled": the
//     child may still work on it, so its questions and log lines are not
//     attributed to another call (child.unsettle), and a call's slot
//     stays taken (child.holdLocked), until the child answers it, answers
//     a probe sent after its cancellation (barrier.go), unsettledFor
//     passes or the child's service ends.
//
// # Locks
//
// Every mutex of the package, and what it guards:
//
//   - Bridge.mu: the slots (worker.active, worker.settling,
//     slot.settling), the queue, the listen count, draining and closing.
//   - worker.mu: the current child, whether one is starting, the era
//     verdict, closing; and child.ready.
//   - child.mu: the pending table, why the child's service ended, a legacy
//     child's listeners, subscriptions and log level, the exchanges ended
//     lately and those unsettled (with the slots kept for them), and the
//     barrier's state.
//   - questions.mu: every question for a client, every parked exchange,
//     every call waiting for a legacy client's answers.
//   - exchange.mu: its call (nil while parked) and how far its write got.
//   - call.mu: whether it has ended, its exchange in flight, its timer, its
//     slot, whether its first exchange is taken.
//   - mailbox.mu: what waits for the client.
//   - toolCache.mu, background.mu, taskHomes.mu: the x-mcp-header cache;
//     the goroutines close waits for; which worker holds each task.
//
// They nest only in this order, outer first:
//
//	Bridge.mu → worker.mu → child.mu
//	questions.mu → exchange.mu → child.mu
//
// call.mu, mailbox.mu, toolCache.mu, background.mu and taskHomes.mu are
// leaves: they may be taken with any other held, and nothing is locked
// while one is held, but for the front door's own lock that arming and
// disarming a call on its client's ctx may take under call.mu (see
// Options.AfterDone), itself a leaf, and the logger's under taskHomes.mu.
// Bridge.mu is also taken to release a slot, always with no other lock
// held. No lock is held while writing to a child or waiting for anything.
package bridge
