// Drives one official TypeScript MCP client for the scale-out test
// (scaleout_test.go), which sends it commands on stdin and reads what
// happened on stdout, one JSON line each way, so that the test can act
// between the steps of calls that run at the same time.
//
//   node scaleout.mjs <url> <modern|legacy> <client name>
//
// Commands:
//   {"op":"call","label":L,"name":TOOL,"arguments":{...},"progress":true}
//       starts a tools/call (not waiting for it); L is added to the
//       arguments as "label" so that the HTTP exchange can be told apart
//   {"op":"abort","label":L}   aborts that call
// End of input closes the client.
//
// Lines written: connected {protocolVersion, sessionId}; http {label, rpc,
// status, upstream, upstreamStatus, session} for every HTTP response
// (upstream is what the proxy says in X-Upstream); progress {label,
// progress}; result {label, text, isError, progressSeen}; error {label,
// message, code, progressSeen}; closed {}.
import { createInterface } from 'node:readline';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, mode, name] = process.argv.slice(2);
const report = (event, fields) => console.log(JSON.stringify({ event, ...fields }));

// The client's own fetch, watched: which replica answered each request.
const traced = async (input, init) => {
  const res = await fetch(input, init);
  let msg = null;
  try {
    msg = typeof init?.body === 'string' ? JSON.parse(init.body) : null;
  } catch {}
  report('http', {
    label: msg?.params?.arguments?.label ?? null,
    httpMethod: init?.method ?? 'GET',
    rpc: msg?.method ?? null,
    status: res.status,
    upstream: res.headers.get('x-upstream'),
    upstreamStatus: res.headers.get('x-upstream-status'),
    session: res.headers.get('mcp-session-id'),
  });
  return res;
};

const options = mode === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {};
const client = new Client({ name: `scaleout-${name}`, version: '1.0.0' }, options);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  fetch: traced,
  requestInit: { headers: { 'X-Scaleout-Client': name } },
});
await client.connect(transport);
report('connected', { protocolVersion: transport.protocolVersion ?? null, sessionId: transport.sessionId ?? null });

const running = new Map();

function call({ label, name: tool, arguments: args, progress }) {
  const abort = new AbortController();
  running.set(label, abort);
  let seen = 0;
  const opts = { signal: abort.signal, timeout: 120000, resetTimeoutOnProgress: true };
  if (progress) {
    opts.onprogress = (p) => {
      seen++;
      report('progress', { label, progress: p.progress });
    };
  }
  client
    .callTool({ name: tool, arguments: { ...args, label } }, opts)
    .then(
      (res) => report('result', { label, text: res.content?.[0]?.text ?? null, isError: res.isError ?? false, progressSeen: seen }),
      (err) => report('error', { label, message: String(err?.message ?? err), code: err?.code ?? null, progressSeen: seen }),
    )
    .finally(() => running.delete(label));
}

for await (const line of createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line);
  if (cmd.op === 'call') call(cmd);
  else if (cmd.op === 'abort') running.get(cmd.label)?.abort(new Error('the scale-out test closes the stream'));
}
await client.close();
report('closed', {});
