#!/usr/bin/env node
// The benchmark's child: a stdio MCP server with no dependencies, so that
// every server under test fronts the same cheap child. One JSON-RPC
// message per line each way. It speaks both eras: a 2025 client starts
// with initialize; a 2026-07-28 request carries its revision in _meta and
// needs no handshake (server/discover describes the server). Nothing is
// logged: the answers are the whole of its work.
//
// Its tool is echo. Two more serve the workloads that are not about echo:
// spin (a CPU-bound call) and big (one large answer). They are always
// callable, but tools/list names them only when the server is started with
// --all-tools, so that what the echo workloads see stays as it was.

const MODERN = "2026-07-28";
const LATEST_LEGACY = "2025-11-25";
const VERSION_KEY = "io.modelcontextprotocol/protocolVersion";
const SERVER_INFO = { name: "bench-echo", version: "1.0.0" };
// Bounds on spin and big: a minute of CPU; a text well within V8's longest
// string (2^29 - 24 UTF-16 units) once the envelope is around it.
const MAX_SPIN_MS = 60000;
const MAX_BIG_BYTES = 256 * 1024 * 1024;

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

const MORE_TOOLS = [
  {
    name: "spin",
    description: "Keeps a core busy for ms milliseconds of CPU time, then answers.",
    inputSchema: {
      type: "object",
      properties: { ms: { type: "number", minimum: 0, maximum: MAX_SPIN_MS } },
      required: ["ms"],
    },
  },
  {
    name: "big",
    description: "Answers one text content of that many bytes.",
    inputSchema: {
      type: "object",
      properties: { bytes: { type: "integer", minimum: 0, maximum: MAX_BIG_BYTES } },
      required: ["bytes"],
    },
  },
];

if (process.argv.includes("--all-tools")) TOOLS.push(...MORE_TOOLS);

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
  let text;
  switch (params && params.name) {
    case "echo":
      if (!args || typeof args.text !== "string") {
        return error(id, -32602, "echo needs arguments.text, a string");
      }
      text = JSON.stringify(args.text);
      break;
    case "spin": {
      const ms = args && args.ms;
      if (typeof ms !== "number" || !(ms >= 0 && ms <= MAX_SPIN_MS)) {
        return error(id, -32602, `spin needs arguments.ms, a number from 0 to ${MAX_SPIN_MS}`);
      }
      text = `"spun ${spin(ms)} times in ${ms} ms"`;
      break;
    }
    case "big": {
      const n = args && args.bytes;
      if (!Number.isInteger(n) || n < 0 || n > MAX_BIG_BYTES) {
        return error(id, -32602, `big needs arguments.bytes, an integer from 0 to ${MAX_BIG_BYTES}`);
      }
      text = bigText(n);
      break;
    }
    default:
      return error(id, -32602, `unknown tool: ${params && params.name}`);
  }
  const content = `{"content":[{"type":"text","text":${text}}]`;
  return result(id, modern ? content + `,"resultType":"complete"}` : content + "}");
}

// spin busies the thread until the process has used ms milliseconds of
// CPU (not of wall time: a spinner that shares a core with others gets
// less of it per millisecond), and counts its rounds, so that the loop is
// not work that can be left out.
function spin(ms) {
  const start = process.cpuUsage();
  const budget = ms * 1000; // µs
  let rounds = 0;
  for (;;) {
    rounds++;
    const used = process.cpuUsage(start);
    if (used.user + used.system >= budget) return rounds;
  }
}

// bigText is n bytes of "x" as a JSON string. The last one is kept: the
// workloads ask for the same size again and again, and building it is
// not what they measure.
let big = { n: -1, json: "" };
function bigText(n) {
  if (big.n !== n) big = { n, json: `"${"x".repeat(n)}"` };
  return big.json;
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
