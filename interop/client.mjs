// Drives the official TypeScript MCP client against a gateway, for the Go
// interop tests: it lists tools, calls one, calls one with progress, and
// cancels one once its progress shows it is running. Each step prints one
// JSON line; the Go test checks them.
//
//   node client.mjs <url> <modern|legacy> <spec JSON>
//
// spec: {"echo": {"name", "arguments", "expect"}, "progress": {...},
//        "cancel": {...}} — the tools to use on this child.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, mode, specJSON] = process.argv.slice(2);
const spec = JSON.parse(specJSON);
const report = (step, fields) => console.log(JSON.stringify({ step, ...fields }));

const options = mode === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {};
const client = new Client({ name: 'gateway-interop', version: '1.0.0' }, options);
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
report('connected', { protocolVersion: transport.protocolVersion ?? null });

const tools = await client.listTools();
report('tools', { names: tools.tools.map((t) => t.name) });

const echoed = await client.callTool({ name: spec.echo.name, arguments: spec.echo.arguments });
report('echo', { text: echoed.content?.[0]?.text ?? null });

const progress = [];
const done = await client.callTool(
  { name: spec.progress.name, arguments: spec.progress.arguments },
  { onprogress: (p) => progress.push(p.progress), timeout: 60000 },
);
report('progress', { values: progress, text: done.content?.[0]?.text ?? null });

const abort = new AbortController();
let seen = 0;
let cancelled = null;
try {
  await client.callTool(
    { name: spec.cancel.name, arguments: spec.cancel.arguments },
    {
      signal: abort.signal,
      timeout: 60000,
      onprogress: () => {
        if (++seen === 1) abort.abort(new Error('interop test cancels'));
      },
    },
  );
  cancelled = 'finished';
} catch (e) {
  cancelled = String(e?.message ?? e);
}
report('cancel', { progressSeen: seen, outcome: cancelled });

await client.close();
report('closed', {});
