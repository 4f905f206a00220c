// The gateway's web page. It lists the tools (GET /v1/tools), builds a form
// for the chosen tool's arguments, runs it (POST /v1/tools/{name}) reading
// the Server-Sent Events answer as it arrives, and shows progress, then the
// result or the problem. Whatever the gateway or the tool sent is shown as
// text (textContent), never parsed as HTML; images and audio only as data:
// URLs of base64 content with a known media type.

const $ = (id) => document.getElementById(id);

const TOKEN_KEY = 'gateway.bearer';
const PROBLEM_PREFIX = 'urn:stdiomcp:problem:';
const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/avif', 'image/bmp']);
const AUDIO_TYPES = new Set(['audio/wav', 'audio/x-wav', 'audio/wave', 'audio/mpeg', 'audio/mp3', 'audio/ogg',
  'audio/webm', 'audio/flac', 'audio/mp4', 'audio/aac']);
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const MAX_LOG = 200; // progress messages kept in the list


const state = {
  tools: [], tool: null,
  simple: false, // the tool's arguments fit the generated form
  mode: 'form', // or 'json'
  controller: null, // the running call's AbortController
  started: 0, timer: 0, progressSeen: false,
  announced: 0, // when the status line last changed for progress
  retry: null, // what to do once a token is given
};

// el builds an element; strings among the children become text nodes.
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = value;
    else if (key === 'for' || key === 'role' || key.startsWith('aria-') || key.startsWith('data-')) node.setAttribute(key, value);
    else node[key] = value;
  }
  node.append(...children.filter((c) => c !== null && c !== undefined && c !== ''));
  return node;
}

const pretty = (value) => JSON.stringify(value, null, 2);

// BIDI are the characters that reorder the text around them (embeddings,
// overrides, isolates, marks): in a name, shown as what they are, so that
// "\u202Egnp.exe" cannot pass for "exe.png".
const BIDI = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;
const shown = (name) => name.replace(BIDI, (c) => `[U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}]`);
const isObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

// askToken shows the token form; retry runs once a token is given.
async function askToken(res, retry) {
  const problem = await readProblem(res);
  const hadToken = sessionStorage.getItem(TOKEN_KEY) !== null;
  sessionStorage.removeItem(TOKEN_KEY);
  state.retry = retry;
  const why = hadToken ? 'The gateway did not accept the token' : 'The gateway asks for a bearer token';
  $('auth-why').textContent = problem.detail ? `${why}: ${problem.detail}` : `${why}.`;
  $('auth').hidden = false;
  $('token').value = '';
  $('token').focus();
}

$('auth').addEventListener('submit', (event) => {
  event.preventDefault();
  const token = $('token').value.trim();
  if (!token) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  $('auth').hidden = true;
  const retry = state.retry;
  state.retry = null;
  retry?.();
});

// readProblem reads an error answer: a problem+json object, or whatever
// else came (a proxy's page), as a problem with the text as its detail.
async function readProblem(res) {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text);
    if (isObject(body)) return { status: res.status, ...body };
  } catch {} // not JSON: described below
  return { status: res.status, title: `HTTP ${res.status} ${res.statusText}`.trim(), detail: text.slice(0, 500) };
}

async function loadTools() {
  const status = $('tools-status');
  status.textContent = 'Loading the tools…';
  try {
    const res = await fetch('v1/tools', { headers: { Accept: 'application/json', ...authHeaders() } });
    if (res.status === 401) {
      status.textContent = 'Sign in to see the tools.';
      return askToken(res, loadTools);
    }
    if (!res.ok) {
      const p = await readProblem(res);
      status.textContent = `The tools could not be listed: ${p.title} (${res.status})${p.detail ? `: ${p.detail}` : ''}`;
      return;
    }
    const { tools } = await res.json();
    state.tools = (Array.isArray(tools) ? tools : []).filter((t) => isObject(t) && typeof t.name === 'string');
  } catch (err) {
    status.textContent = `The tools could not be listed: ${err.message}`;
    return;
  }
  renderTools();
  selectFromHash();
}

// A link to the page may name a tool: /#echo.
function selectFromHash() {
  const tool = state.tools.find((t) => `#${encodeURIComponent(t.name)}` === location.hash);
  if (tool && tool !== state.tool) select(tool, false);
}

function renderTools() {
  $('tools').replaceChildren(...state.tools.map((tool) => {
    const title = tool.title || tool.annotations?.title;
    // Long names may break after _ - . or /.
    const name = shown(tool.name).split(/(?<=[_\-./])/).flatMap((part) => [part, el('wbr')]);
    const button = el('button', { type: 'button', class: 'tool', 'data-tool': tool.name, 'aria-pressed': 'false' },
      el('span', { class: 'name' }, ...name),
      typeof title === 'string' && title !== tool.name ? el('span', { class: 'title', text: title }) : null,
      tool.annotations?.readOnlyHint === true ? el('span', { class: 'badge', text: 'read-only' }) : null);
    button.addEventListener('click', () => select(tool, true));
    return el('li', { 'data-search': `${tool.name} ${typeof title === 'string' ? title : ''}`.toLowerCase() }, button);
  }));
  filterTools();
}

function filterTools() {
  const words = $('filter').value.toLowerCase().split(/\s+/).filter(Boolean);
  let shown = 0;
  for (const li of $('tools').children) {
    li.hidden = !words.every((w) => li.dataset.search.includes(w));
    if (!li.hidden) shown++;
  }
  const n = state.tools.length;
  $('tools-status').textContent = n === 0 ? 'The server has no tools.' : shown === n ? `${n} tool${n === 1 ? '' : 's'}` : `${shown} of ${n} tools`;
}

// fieldKind is the form control a property schema gets, or null when the
// property needs the JSON editor.
function fieldKind(p) {
  if (!isObject(p)) return null;
  if (Array.isArray(p.enum) && p.enum.length > 0 && p.enum.every((v) => ['string', 'number', 'boolean'].includes(typeof v))) return 'enum';
  return ['string', 'number', 'integer', 'boolean'].includes(p.type) ? p.type : null;
}

function isSimple(schema) {
  if (!isObject(schema) || schema.type !== 'object') return false;
  const props = schema.properties ?? {};
  return isObject(props) && Object.values(props).every((p) => fieldKind(p) !== null);
}

function defaults(schema) {
  const out = Object.create(null);
  for (const [name, p] of Object.entries(isObject(schema?.properties) ? schema.properties : {})) {
    if (isObject(p) && p.default !== undefined) out[name] = p.default;
  }
  return out;
}

function select(tool, focus) {
  if (state.controller) {
    // The call of the tool shown so far ends with it.
    state.controller.abort();
    state.controller = null;
    clearInterval(state.timer);
    $('run').disabled = false;
    $('cancel').disabled = true;
  }
  state.tool = tool;
  for (const b of $('tools').querySelectorAll('button')) b.setAttribute('aria-pressed', String(b.dataset.tool === tool.name));
  history.replaceState(null, '', `#${encodeURIComponent(tool.name)}`);
  $('call').hidden = false;
  $('call').dataset.state = 'idle';
  $('tool-name').textContent = shown(tool.name);
  const title = tool.title || tool.annotations?.title;
  $('tool-description').textContent = [title !== tool.name ? title : '', tool.description].filter((s) => typeof s === 'string' && s).join(' — ');
  const schema = tool.inputSchema;
  state.simple = isSimple(schema);
  buildFields(schema);
  $('json').value = pretty(defaults(schema));
  // What the JSON must hold, for a tool the form cannot show.
  $('schema').textContent = pretty(schema ?? {});
  $('schema-view').open = !state.simple;
  $('mode').hidden = !state.simple;
  $('json-hint').textContent = state.simple ? 'Ctrl+Enter runs.' : "This tool's arguments are edited as JSON. Ctrl+Enter runs.";
  showMode(state.simple ? 'form' : 'json');
  hideArgsError();
  $('activity').hidden = true;
  $('output').hidden = true;
  if (focus) ($('fields').querySelector('input, select') ?? (state.simple ? $('run') : $('json'))).focus();
}

function buildFields(schema) {
  const box = $('fields');
  box.replaceChildren();
  if (!state.simple) return;
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const entries = Object.entries(schema.properties ?? {});
  if (entries.length === 0) box.append(el('p', { class: 'hint', text: 'This tool takes no arguments.' }));
  entries.forEach(([name, p], i) => {
    const id = `arg-${i}`;
    const kind = fieldKind(p);
    const req = required.has(name);
    let input;
    if (kind === 'enum') {
      input = el('select', { id });
      if (!req || p.default === undefined) input.append(el('option', { value: '', text: '—' }));
      p.enum.forEach((v, j) => input.append(el('option', { value: String(j), text: String(v) })));
      input.enumValues = p.enum;
    } else if (kind === 'boolean') {
      input = el('input', { id, type: 'checkbox' });
    } else if (kind === 'string') {
      input = el('input', { id, type: 'text', spellcheck: false });
    } else {
      input = el('input', { id, type: 'number', step: kind === 'integer' ? '1' : 'any', inputMode: kind === 'integer' ? 'numeric' : 'decimal' });
      if (typeof p.minimum === 'number') input.min = String(p.minimum);
      if (typeof p.maximum === 'number') input.max = String(p.maximum);
    }
    input.dataset.arg = name;
    input.dataset.kind = kind;
    if (req) input.setAttribute('aria-required', 'true');
    const hint = [p.title !== name ? p.title : '', p.description].filter((s) => typeof s === 'string' && s).join(' — ');
    if (hint) input.setAttribute('aria-describedby', `${id}-hint`);
    const label = el('label', { for: id }, name, req ? el('span', { class: 'required', text: ' (required)' }) : null);
    box.append(el('div', { class: kind === 'boolean' ? 'field check' : 'field' },
      ...(kind === 'boolean' ? [input, label] : [label, input]),
      hint ? el('p', { class: 'hint', id: `${id}-hint`, text: hint }) : null));
  });
  fillForm(defaults(schema));
}

// argsError is an error in the arguments, with the field to fix.
const argsError = (message, input) => Object.assign(new Error(message), { input });

// readForm collects the arguments the form holds; an empty field is left
// out, so that the tool's own default applies.
function readForm() {
  const args = Object.create(null); // a property may be named __proto__
  for (const input of $('fields').querySelectorAll('[data-arg]')) {
    const name = input.dataset.arg;
    const kind = input.dataset.kind;
    if (kind === 'boolean') {
      // A required one is always sent: unticked, it says false.
      if (input.checked || input.dataset.set || input.getAttribute('aria-required') === 'true') args[name] = input.checked;
    } else if (kind !== 'string' && input.validity.badInput) {
      throw argsError(`${name}: not a number`, input);
    } else if (input.value !== '') {
      args[name] = kind === 'enum' ? input.enumValues[Number(input.value)] : kind === 'string' ? input.value : Number(input.value);
    }
  }
  return args;
}

// fillForm puts values into the form and returns the names it could not
// show.
function fillForm(values) {
  const inputs = [...$('fields').querySelectorAll('[data-arg]')];
  const names = new Set(inputs.map((i) => i.dataset.arg));
  const misfits = Object.keys(values).filter((k) => !names.has(k));
  for (const input of inputs) {
    const name = input.dataset.arg;
    const kind = input.dataset.kind;
    const v = Object.hasOwn(values, name) ? values[name] : undefined;
    const fits = v === undefined || (kind === 'enum' ? input.enumValues.includes(v) : typeof v === (kind === 'integer' ? 'number' : kind));
    if (!fits) {
      misfits.push(name);
    } else if (kind === 'boolean') {
      input.checked = v === true;
      input.dataset.set = v === undefined ? '' : '1';
    } else {
      input.value = v === undefined ? '' : kind === 'enum' ? String(input.enumValues.indexOf(v)) : String(v);
    }
  }
  return misfits;
}

function parseJSONArgs() {
  const text = $('json').value.trim();
  let args;
  try {
    args = text === '' ? {} : JSON.parse(text);
  } catch (err) {
    throw argsError(`The arguments are not JSON: ${err.message}`, $('json'));
  }
  if (!isObject(args)) throw argsError('The arguments must be a JSON object.', $('json'));
  return args;
}

function showMode(mode) {
  state.mode = mode;
  $('fields').hidden = mode !== 'form';
  $('json-editor').hidden = mode !== 'json';
  $('mode').textContent = mode === 'json' ? 'Edit as form' : 'Edit as JSON';
  $('mode').setAttribute('aria-pressed', String(mode === 'json'));
}

// The toggle carries the arguments across; JSON the form cannot show
// stays in the JSON editor.
$('mode').addEventListener('click', () => {
  try {
    if (state.mode === 'form') {
      $('json').value = pretty(readForm());
      showMode('json');
      $('json').focus();
    } else {
      const args = parseJSONArgs();
      const misfits = fillForm(args);
      if (misfits.length) throw argsError(`The form cannot show ${misfits.join(', ')}: keep editing as JSON.`, $('json'));
      showMode('form');
    }
    hideArgsError();
  } catch (err) {
    showArgsError(err);
  }
});

function showArgsError(err) {
  $('args-error').textContent = err.message;
  $('args-error').hidden = false;
  err.input?.focus();
}

function hideArgsError() {
  $('args-error').hidden = true;
  for (const i of $('fields').querySelectorAll('[aria-invalid]')) i.removeAttribute('aria-invalid');
}

function formatElapsed(ms) {
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 60)} min ${String(Math.floor(s % 60)).padStart(2, '0')} s`;
}

const tick = () => { $('elapsed').textContent = formatElapsed(performance.now() - state.started); };
const setStatus = (text) => { $('status').textContent = text; };

async function run() {
  if (state.controller || !state.tool) return;
  if (state.tool.name === '.' || state.tool.name === '..') {
    // Browsers resolve "." and ".." in a URL's path, escaped or not, so the
    // call would reach another route.
    showArgsError(new Error(`A browser cannot call a tool named "${state.tool.name}" by its URL; use curl (the name escaped as %2E).`));
    return;
  }
  let args;
  try {
    args = state.mode === 'json' ? parseJSONArgs() : readForm();
  } catch (err) {
    // What the last call showed is not this one's.
    $('call').dataset.state = 'idle';
    $('activity').hidden = true;
    $('output').hidden = true;
    showArgsError(err);
    return;
  }
  hideArgsError();
  const tool = state.tool;
  const controller = new AbortController();
  state.controller = controller;
  begin(tool);
  let outcome;
  try {
    const res = await fetch(`v1/tools/${encodeURIComponent(tool.name)}`, {
      method: 'POST',
      headers: { Accept: 'text/event-stream', 'Content-Type': 'application/json', ...authHeaders() },
      body: JSON.stringify(args),
      signal: controller.signal,
    });
    outcome = await answer(res);
  } catch (err) {
    outcome = controller.signal.aborted ? { state: 'cancelled' } : failed({ title: 'The call did not complete', detail: err.message });
  }
  if (state.controller === controller) finish(outcome);
}

function begin(tool) {
  $('call').dataset.state = 'running';
  $('run').disabled = true;
  $('cancel').disabled = false;
  $('activity').hidden = false;
  $('output').hidden = true;
  $('result').replaceChildren();
  $('progress').removeAttribute('value');
  $('progress').removeAttribute('max');
  $('progress-label').textContent = 'Waiting for progress…';
  $('meter').hidden = false;
  $('log').replaceChildren();
  $('log-count').textContent = '0';
  setStatus(`Running ${tool.name}… (Escape cancels)`);
  state.progressSeen = false;
  state.announced = state.started = performance.now();
  tick();
  state.timer = setInterval(tick, 100);
}

async function answer(res) {
  if (res.status === 401) return { state: 'auth', res };
  const type = res.headers.get('Content-Type') ?? '';
  if (res.ok && type.startsWith('text/event-stream')) return readStream(res.body);
  if (res.ok) {
    const result = await res.json();
    return { state: result?.isError === true ? 'tool-error' : 'done', result };
  }
  return failed(await readProblem(res), res.headers.get('Retry-After'));
}

const problemKind = (p) => (typeof p.type === 'string' && p.type.startsWith(PROBLEM_PREFIX) ? p.type.slice(PROBLEM_PREFIX.length) : '');

function failed(problem, retryAfter) {
  return { state: problemKind(problem) === 'tool-error' ? 'tool-error' : 'error', problem, retryAfter };
}

async function readStream(body) {
  for await (const event of sseEvents(body)) {
    let data;
    try {
      data = JSON.parse(event.data);
    } catch {
      return failed({ title: 'The gateway sent an unreadable event', detail: event.data.slice(0, 500) });
    }
    if (event.type === 'progress') progress(data);
    else if (event.type === 'result') return { state: data?.isError === true ? 'tool-error' : 'done', result: data };
    else if (event.type === 'error') return failed(isObject(data) ? data : { title: String(data) });
  }
  return failed({ title: 'The stream ended without a result', detail: 'The connection closed before the gateway sent the result.' });
}

// sseEvents yields the events of a text/event-stream body as {type, data},
// parsed as the HTML standard describes: lines end at CRLF, LF or CR, a
// blank line ends an event, lines starting with a colon are comments.
async function* sseEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  const eol = /\r\n|\n|\r(?!$)/g; // a CR at the very end may be half of a CRLF
  let buffer = '';
  let type = '';
  let data = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return; // an unfinished event is dropped
      // Only the new text can hold a line end (and the CR left before it).
      eol.lastIndex = Math.max(0, buffer.length - 1);
      buffer += value;
      let start = 0;
      for (let m = eol.exec(buffer); m !== null; m = eol.exec(buffer)) {
        const line = buffer.slice(start, m.index);
        start = eol.lastIndex;
        if (line === '') {
          if (data.length) yield { type: type || 'message', data: data.join('\n') };
          type = '';
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (field === 'event') type = val;
        else if (field === 'data') data.push(val);
      }
      buffer = buffer.slice(start);
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

function progress(p) {
  if (!isObject(p) || typeof p.progress !== 'number') return;
  state.progressSeen = true;
  const bar = $('progress');
  const known = typeof p.total === 'number' && p.total > 0;
  if (known) [bar.max, bar.value] = [p.total, Math.min(p.progress, p.total)];
  else bar.removeAttribute('value');
  const amount = known ? `${p.progress} of ${p.total}` : `${p.progress}`;
  const message = typeof p.message === 'string' && p.message ? p.message : '';
  // A message that already says how far ("step 7 of 100") is not told it again.
  $('progress-label').textContent = message ? (known && message.includes(amount) ? message : `${message} (${amount})`) : `Progress: ${amount}`;
  if (message) {
    const log = $('log');
    log.append(el('li', { text: message }));
    while (log.children.length > MAX_LOG) log.firstElementChild.remove();
    $('log-count').textContent = String(log.children.length);
  }
  // The status line is a live region: changing it on every event would
  // flood a screen reader, so it follows progress once a few seconds.
  const now = performance.now();
  if (now - state.announced > 3000) {
    state.announced = now;
    setStatus(`Running ${state.tool.name}: ${message || amount}`);
  }
}

const cancel = () => state.controller?.abort();

function finish(outcome) {
  clearInterval(state.timer);
  tick();
  state.controller = null;
  $('run').disabled = false;
  $('cancel').disabled = true;
  if (document.activeElement === document.body || document.activeElement === $('cancel')) $('run').focus();
  const took = $('elapsed').textContent;
  const bar = $('progress');
  $('meter').hidden = !state.progressSeen;
  if (outcome.state === 'done') bar.value = bar.max; // max is 1 when no total came
  else if (!bar.hasAttribute('value')) bar.value = 0;
  $('call').dataset.state = outcome.state === 'auth' ? 'idle' : outcome.state;
  if (outcome.state === 'auth') {
    setStatus('Sign in to run the tool.');
    askToken(outcome.res, run);
    return;
  }
  setStatus({
    done: `Done in ${took}.`,
    'tool-error': `The tool reported an error after ${took}.`,
    cancelled: `Cancelled after ${took}. The gateway tells the tool to stop.`,
    error: `Failed after ${took}: ${outcome.problem?.title || 'error'}.`,
  }[outcome.state]);
  if (outcome.problem) renderProblem(outcome.problem, outcome.retryAfter);
  else if (outcome.result) {
    const isError = outcome.state === 'tool-error';
    appendResult(showOutput(isError ? 'The tool reported an error' : 'Result', isError), outcome.result);
  }
}

function showOutput(heading, isError) {
  $('output').hidden = false;
  $('output').classList.toggle('is-error', isError);
  $('output-heading').textContent = heading;
  $('result').replaceChildren();
  return $('result');
}

function appendResult(box, result) {
  const content = Array.isArray(result?.content) ? result.content : [];
  for (const item of content) box.append(renderContent(item));
  if (result?.structuredContent !== undefined) {
    box.append(el('h4', { text: 'Structured content' }), el('pre', { class: 'json', text: pretty(result.structuredContent) }));
  }
  if (content.length === 0 && result?.structuredContent === undefined) box.append(el('p', { class: 'hint', text: 'The result is empty.' }));
}

function renderContent(item) {
  switch (item?.type) {
    case 'text':
      return el('pre', { class: 'text', text: String(item.text ?? '') });
    case 'image':
    case 'audio':
      return media(item.data, item.mimeType);
    case 'resource':
      return embedded(item.resource);
    case 'resource_link':
      return el('p', { class: 'link' }, 'Resource link: ', el('code', { text: String(item.uri ?? '') }),
        typeof item.name === 'string' ? ` (${item.name})` : null);
    default:
      return el('pre', { class: 'json', text: pretty(item) });
  }
}

// media shows base64 image or audio content, of a type on the allow lists
// only, as a data: URL.
function media(data, mimeType) {
  const type = String(mimeType ?? '').toLowerCase();
  const image = IMAGE_TYPES.has(type);
  if (!(image || AUDIO_TYPES.has(type)) || typeof data !== 'string' || !BASE64.test(data)) {
    return el('p', { class: 'hint', text: `Binary content of type ${type || 'unknown'} is not shown.` });
  }
  const src = `data:${type};base64,${data}`;
  return image ? el('img', { src, alt: `Image from the tool (${type})` }) : el('audio', { src, controls: true, 'aria-label': `Audio from the tool (${type})` });
}

function embedded(resource) {
  const r = isObject(resource) ? resource : {};
  const figure = el('figure', { class: 'resource' },
    el('figcaption', {}, 'Resource ', el('code', { text: String(r.uri ?? '') }), typeof r.mimeType === 'string' ? ` (${r.mimeType})` : null));
  if (typeof r.text === 'string') figure.append(el('pre', { class: 'text', text: r.text }));
  else if (typeof r.blob === 'string') figure.append(media(r.blob, r.mimeType));
  return figure;
}

function renderProblem(p, retryAfter) {
  const kind = problemKind(p);
  const box = showOutput(String(p.title || 'The call failed'), true);
  box.append(el('p', { class: 'problem-kind', text: [p.status ? `HTTP ${p.status}` : '', kind].filter(Boolean).join(' · ') }));
  if (p.detail) box.append(el('p', { class: 'detail', text: String(p.detail) }));
  if (Array.isArray(p.errors) && p.errors.length) {
    box.append(el('ul', { class: 'errors' }, ...p.errors.map((e) => el('li', {},
      el('code', { text: e?.path ? String(e.path) : '(arguments)' }), ' ', String(e?.message ?? '')))));
    markInvalid(p.errors);
  }
  if (kind === 'tool-error' && isObject(p.result)) {
    box.append(el('h4', { text: "The tool's answer" }));
    appendResult(box, p.result);
  }
  if (kind === 'input-required') {
    box.append(el('p', { text: "This page cannot answer a tool's questions: an MCP client on /mcp can." }));
    if (p.inputRequests !== undefined) box.append(el('pre', { class: 'json', text: pretty(p.inputRequests) }));
  }
  if (isObject(p.error)) box.append(el('pre', { class: 'json', text: pretty(p.error) }));
  if (retryAfter) box.append(el('p', { text: `The gateway asks to try again in ${retryAfter} s.` }));
}

// markInvalid flags the form fields that invalid-arguments errors point at.
function markInvalid(errors) {
  const names = new Set(errors.map((e) => (typeof e?.path === 'string' ? e.path.split('/')[1]?.replaceAll('~1', '/').replaceAll('~0', '~') : undefined)));
  for (const input of $('fields').querySelectorAll('[data-arg]')) {
    if (names.has(input.dataset.arg)) input.setAttribute('aria-invalid', 'true');
  }
}

$('args').addEventListener('submit', (event) => { event.preventDefault(); run(); });
$('cancel').addEventListener('click', cancel);
$('filter').addEventListener('input', filterTools);
window.addEventListener('hashchange', selectFromHash);
$('fields').addEventListener('change', (event) => {
  if (event.target.dataset.kind === 'boolean') event.target.dataset.set = '1';
});
// Enter runs from any field (a select or a checkbox does not submit on
// its own); Ctrl+Enter from the JSON editor.
$('args').addEventListener('keydown', (event) => {
  if (event.key !== 'Enter' || event.isComposing) return;
  const t = event.target;
  if ((t.tagName === 'SELECT' || t.type === 'checkbox') || (t === $('json') && (event.ctrlKey || event.metaKey))) {
    event.preventDefault();
    $('args').requestSubmit();
  }
});
document.addEventListener('keydown', (event) => {
  if (event.key === 'Escape' && state.controller) {
    event.preventDefault();
    cancel();
  }
});

loadTools();
