#!/usr/bin/env node
// The benchmark's child: a stdio MCP server with one tool, echo, and no
// dependencies, so that every server under test fronts the same cheap
// child. One JSON-RPC message per line each way. It speaks both eras: a
// 2025 client starts with initialize; a 2026-07-28 request carries its
// revision in _meta and needs no handshake (server/discover describes the
// server). Nothing is logged: the answers are the whole of its work.

const MODERN = "2026-07-28";
const LATEST_LEGACY = "2025-11-25";
const VERSION_KEY = "io.modelcontextprotocol/protocolVersion";
const SERVER_INFO = { name: "bench-echo", version: "1.0.0" };

const TOOLS = [
  {
    name: "echo",
    description: "Returns its text.",
    inputSchema: {
      type: "object",
      properties: { text: { type: "string" } },
      required: ["text"],
    },
  },
];

// The answers that never change, serialised once.
const TOOLS_JSON = JSON.stringify(TOOLS);
const LEGACY_TOOLS = `{"tools":${TOOLS_JSON}}`;
const MODERN_TOOLS = `{"tools":${TOOLS_JSON},"resultType":"complete","ttlMs":0,"cacheScope":"public"}`;
const DISCOVER = JSON.stringify({
  supportedVersions: [MODERN],
  capabilities: { tools: {} },
  resultType: "complete",
  ttlMs: 0,
  cacheScope: "public",
  _meta: { "io.modelcontextprotocol/serverInfo": SERVER_INFO },
});

function result(id, body) {
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${body}}\n`;
}

function error(id, code, message, data) {
  const e = { code, message };
  if (data !== undefined) e.data = data;
  return JSON.stringify({ jsonrpc: "2.0", id, error: e }) + "\n";
}

function initialize(id, params) {
  const asked = params && params.protocolVersion;
  const version = typeof asked === "string" && asked.startsWith("2025-") ? asked : LATEST_LEGACY;
  return result(
    id,
    JSON.stringify({ protocolVersion: version, capabilities: { tools: {} }, serverInfo: SERVER_INFO }),
  );
}

function call(id, params, modern) {
  const args = params && params.arguments;
  if (!params || params.name !== "echo") {
    return error(id, -32602, `unknown tool: ${params && params.name}`);
  }
  if (!args || typeof args.text !== "string") {
    return error(id, -32602, "echo needs arguments.text, a string");
  }
  const content = `{"content":[{"type":"text","text":${JSON.stringify(args.text)}}]`;
  return result(id, modern ? content + `,"resultType":"complete"}` : content + "}");
}

// answer is the line to write for one message, or "" for none.
function answer(line) {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return error(null, -32700, "parse error");
  }
  if (m === null || typeof m !== "object" || Array.isArray(m) || typeof m.method !== "string") {
    // A response to us (we send no requests) or something that is not a
    // message at all.
    return m && typeof m === "object" && "id" in m && !("method" in m) ? "" : error(null, -32600, "invalid request");
  }
  if (!("id" in m)) return ""; // notifications, notifications/initialized among them
  const id = m.id;
  const params = m.params;
  const meta = params && params._meta;
  const asked = meta && meta[VERSION_KEY];
  const modern = asked !== undefined || m.method === "server/discover";
  if (asked !== undefined && asked !== MODERN) {
    return error(id, -32022, "unsupported protocol version", { supported: [MODERN], requested: asked });
  }
  switch (m.method) {
    case "tools/call":
      return call(id, params, modern);
    case "initialize":
      return initialize(id, params);
    case "server/discover":
      return result(id, DISCOVER);
    case "ping":
      return result(id, modern ? `{"resultType":"complete"}` : "{}");
    case "tools/list":
      return result(id, modern ? MODERN_TOOLS : LEGACY_TOOLS);
    default:
      return error(id, -32601, `method not found: ${m.method}`);
  }
}

// Lines are split by hand and the answers to one read go out in one write:
// a pipelining client costs one syscall per chunk, not per message.
let pending = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  pending += chunk;
  let out = "";
  let start = 0;
  for (let nl = pending.indexOf("\n", start); nl >= 0; nl = pending.indexOf("\n", start)) {
    const line = pending.slice(start, nl).trim();
    start = nl + 1;
    if (line !== "") out += answer(line);
  }
  pending = pending.slice(start);
  if (out !== "") process.stdout.write(out);
});
// At end of input Node exits by itself once the answers are written.
