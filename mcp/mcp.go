// Package mcp is the Model Context Protocol's vocabulary as the gateway
// uses it, in one place: the revisions it speaks, method names, _meta keys,
// error codes, log levels, HTTP header names, and the pure edits that carry
// a message between the two eras (2025 revisions with initialize, and the
// stateless 2026-07-28). It also reads a client's request: every member the
// gateway acts on, found once, and refused when another decoder could read
// it otherwise (see Read).
//
// It imports only jsonrpc. bridge, httpapi and the demo server import it,
// so nothing MCP-specific is spelled twice.
package mcp

import "slices"

// Revisions.
const (
	// Modern is the stateless revision: no initialize, no sessions, every
	// request carries its version and the client's capabilities in _meta.
	Modern = "2026-07-28"
	// LatestLegacy is the newest revision that starts with initialize.
	LatestLegacy = "2025-11-25"
)

// IsLegacy reports whether v is a revision that starts with initialize.
func IsLegacy(v string) bool {
	l := legacyRevisions()
	return slices.Contains(l[:], v)
}

func legacyRevisions() [4]string {
	return [4]string{LatestLegacy, "2025-06-18", "2025-03-26", "2024-11-05"}
}

// LegacyRevisions are the revisions that start with initialize, newest
// first.
func LegacyRevisions() []string {
	l := legacyRevisions()
	return l[:]
}

// Methods.
const (
	MethodInitialize     = "initialize"
	MethodDiscover       = "server/discover"
	MethodPing           = "ping"
	MethodListen         = "subscriptions/listen"
	MethodToolsList      = "tools/list"
	MethodToolsCall      = "tools/call"
	MethodPromptsList    = "prompts/list"
	MethodPromptsGet     = "prompts/get"
	MethodResourcesList  = "resources/list"
	MethodTemplatesList  = "resources/templates/list"
	MethodResourcesRead  = "resources/read"
	MethodSubscribe      = "resources/subscribe"
	MethodUnsubscribe    = "resources/unsubscribe"
	MethodComplete       = "completion/complete"
	MethodSetLevel       = "logging/setLevel"
	MethodSampling       = "sampling/createMessage"
	MethodElicit         = "elicitation/create"
	MethodRootsList      = "roots/list"
	MethodTasksGet       = "tasks/get"
	MethodTasksUpdate    = "tasks/update"
	MethodTasksCancel    = "tasks/cancel"
	MethodTasksList      = "tasks/list"
	MethodTasksResult    = "tasks/result" // 2025-11-25's tasks
	tasksMethodPrefix    = "tasks/"
	NoteInitialized      = "notifications/initialized"
	NoteCancelled        = "notifications/cancelled"
	NoteProgress         = "notifications/progress"
	NoteMessage          = "notifications/message"
	NoteToolsChanged     = "notifications/tools/list_changed"
	NotePromptsChanged   = "notifications/prompts/list_changed"
	NoteResourcesChanged = "notifications/resources/list_changed"
	NoteResourceUpdated  = "notifications/resources/updated"
	NoteRootsChanged     = "notifications/roots/list_changed"
	NoteAcknowledged     = "notifications/subscriptions/acknowledged"
)

// IsTaskMethod reports whether method belongs to the tasks extension: a
// look at a task, or its cancellation, never the task itself.
func IsTaskMethod(method string) bool {
	return len(method) > len(tasksMethodPrefix) && method[:len(tasksMethodPrefix)] == tasksMethodPrefix
}

// KeptFromServer reports whether a client's notification of method is
// one a gateway that shares its server among clients keeps from it: it
// only makes sense between one client and one server (the client's
// handshake, its roots, a cancellation or progress naming its own
// requests), and the gateway acts on it itself, if at all.
func KeptFromServer(method string) bool {
	switch method {
	case NoteCancelled, NoteProgress, NoteInitialized, NoteRootsChanged:
		return true
	}
	return false
}

// RemovedInModern reports whether 2026-07-28 took method away: a modern
// request for it is refused even though a legacy child would serve it.
func RemovedInModern(method string) bool {
	switch method {
	case MethodInitialize, MethodPing, MethodSetLevel, MethodSubscribe, MethodUnsubscribe,
		// 2025-11-25's tasks: the tasks extension keeps get, update and
		// cancel, and has no list and no blocking result.
		MethodTasksList, MethodTasksResult:
		return true
	}
	return false
}

// Cacheable reports whether a 2026-07-28 result of method must carry
// ttlMs and cacheScope.
func Cacheable(method string) bool {
	switch method {
	case MethodDiscover, MethodToolsList, MethodPromptsList, MethodResourcesList, MethodTemplatesList, MethodResourcesRead:
		return true
	}
	return false
}

// NameField is the params member that the Mcp-Name header mirrors for
// method; "" when none does.
func NameField(method string) string {
	switch method {
	case MethodToolsCall, MethodPromptsGet:
		return ParamName
	case MethodResourcesRead:
		return ParamURI
	case MethodTasksGet, MethodTasksUpdate, MethodTasksCancel:
		return ParamTaskID
	}
	return ""
}

// Keys of params._meta.
const (
	MetaProgressToken      = "progressToken"
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
	// W3C trace context, carried in _meta (the gateway adds it from the
	// HTTP request's headers when the request has none of its own).
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// TasksExtension names the tasks extension in capabilities.extensions.
const TasksExtension = "io.modelcontextprotocol/tasks"

// Error codes MCP defines. JSON-RPC's own are in package jsonrpc.
const (
	CodeHeaderMismatch     = -32020 // 2026-07-28: a header disagrees with the body it mirrors
	CodeMissingCapability  = -32021 // 2026-07-28: the request needs a client capability not declared
	CodeUnsupportedVersion = -32022 // 2026-07-28: the protocol version is not supported
	CodeLegacyNotFound     = -32002 // 2025 revisions: resource not found (2026-07-28 says -32602)
)

// Result types of 2026-07-28.
const (
	ResultComplete      = "complete"
	ResultInputRequired = "input_required"
	ResultTask          = "task"
)

// HTTP header names of the Streamable HTTP transport.
const (
	HeaderProtocolVersion = "MCP-Protocol-Version"
	// HeaderProtocolVersionKey is the same name as net/http files it (its
	// canonical form): a lookup by another spelling copies the name first.
	HeaderProtocolVersionKey = "Mcp-Protocol-Version"
	HeaderMethod             = "Mcp-Method"
	HeaderName               = "Mcp-Name"
	HeaderSession            = "Mcp-Session-Id"
	HeaderParamPrefix        = "Mcp-Param-"
)

// LogLevels are the syslog levels of notifications/message, least severe
// first.
func LogLevels() []string {
	l := logLevels()
	return l[:]
}

func logLevels() [8]string {
	return [8]string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}
}

// LogRank orders log levels by severity; -1 for a name that is not one.
func LogRank(level string) int {
	for i, l := range logLevels() {
		if l == level {
			return i
		}
	}
	return -1
}

// Client capabilities the gateway deals in.
const (
	CapSampling    = "sampling"
	CapElicitation = "elicitation"
	CapRoots       = "roots"
	CapLogging     = "logging"
)

// CapabilityFor names the client capability a server-to-client request
// needs; "" for a method no client of the gateway can be asked.
func CapabilityFor(method string) string {
	switch method {
	case MethodSampling:
		return CapSampling
	case MethodElicit:
		return CapElicitation
	case MethodRootsList:
		return CapRoots
	}
	return ""
}
