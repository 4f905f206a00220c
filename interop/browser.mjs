// Drives the gateway's web page in Debian's Chromium with playwright-core,
// for browser_test.go:
//
//   node browser.mjs <gateway URL> <screenshot dir>
//
// CHROMIUM names the browser (default /usr/bin/chromium); AUTH_URL and
// AUTH_TOKEN, a gateway that wants that bearer token. It prints one JSON
// line per event on stdout ({"event":"screenshot","name":...,"path":...},
// {"event":"cancelled",...}, {"event":"done"}); after "cancelled" it waits
// for a line on stdin, while the test checks what the child received. Any
// failed check ends it with status 1 and the reason on stderr. Every wait
// is bounded.

import { chromium } from 'playwright-core';
import { createInterface } from 'node:readline';
import { join } from 'node:path';

const [url, dir] = process.argv.slice(2);
if (!url || !dir) {
  console.error('usage: node browser.mjs <gateway URL> <screenshot dir>');
  process.exit(2);
}
const TIMEOUT = 30_000;
const stdin = createInterface({ input: process.stdin });
const lines = stdin[Symbol.asyncIterator]();

function emit(event) {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

function check(ok, message) {
  if (!ok) throw new Error(message);
}

async function screenshot(page, name) {
  const path = join(dir, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  emit({ event: 'screenshot', name, path });
}

// Problems the page itself causes: uncaught errors, and console errors
// other than the browser's note on each refused request (the tests make
// some on purpose), such as a Content-Security-Policy violation.
const pageProblems = [];
function watch(page) {
  page.on('pageerror', (err) => pageProblems.push(`uncaught: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !msg.text().startsWith('Failed to load resource')) pageProblems.push(`console: ${msg.text()}`);
  });
  return page;
}

async function open(context, target = url) {
  const page = watch(await context.newPage());
  await page.goto(target);
  await page.locator('#tools button.tool').first().waitFor();
  return page;
}

// finished waits until the call is no longer running and returns what the
// page shows.
async function finished(page) {
  await page.waitForFunction(() => !['running', 'idle'].includes(document.getElementById('call').dataset.state));
  return page.evaluate(() => ({
    state: document.getElementById('call').dataset.state,
    status: document.getElementById('status').textContent,
    texts: [...document.querySelectorAll('#result pre.text')].map((p) => p.textContent),
    kind: document.querySelector('#result .problem-kind')?.textContent ?? '',
    errors: [...document.querySelectorAll('#result .errors li')].map((li) => li.textContent),
  }));
}

async function expectResult(page, text) {
  const got = await finished(page);
  check(got.state === 'done', `the call ended ${got.state} (${got.status} ${got.kind}), want done`);
  check(got.texts.length === 1 && got.texts[0] === text, `the result shows ${JSON.stringify(got.texts)}, want [${JSON.stringify(text)}]`);
  check(/^Done in \d+\.\d s\.$/.test(got.status), `the status reads ${JSON.stringify(got.status)}`);
}

// watchProgress records every value the progress bar takes.
async function watchProgress(page) {
  await page.evaluate(() => {
    const bar = document.getElementById('progress');
    window.progressValues = [];
    new MutationObserver(() => {
      if (bar.hasAttribute('value')) window.progressValues.push(bar.value);
    }).observe(bar, { attributes: true, attributeFilter: ['value'] });
  });
}

const advancedTwice = () => {
  const v = window.progressValues;
  return v.filter((x, i) => i > 0 && x > v[i - 1]).length >= 2;
};

// A long call with progress, cancelled with the button.
async function slowThenCancel(context) {
  const page = await open(context);
  await page.locator('button.tool[data-tool="slow"]').click();
  await page.getByLabel('duration_ms').fill('20000');
  await page.getByLabel('interval_ms').fill('100');
  await watchProgress(page);
  await page.getByRole('button', { name: 'Run' }).click();
  await page.waitForFunction(advancedTwice);
  const running = await page.evaluate(() => ({
    state: document.getElementById('call').dataset.state,
    max: document.getElementById('progress').max,
    label: document.getElementById('progress-label').textContent,
    elapsed: document.getElementById('elapsed').textContent,
  }));
  check(running.state === 'running', `the page shows ${running.state} while the call runs`);
  check(running.max === 200, `the progress bar's max is ${running.max}, want 200 (20000 ms / 100 ms)`);
  // The message says how far already: the amount is not said twice.
  check(/^step \d+ of 200$/.test(running.label), `the progress label reads ${JSON.stringify(running.label)}`);
  check(/^\d+\.\d s$/.test(running.elapsed), `the elapsed time reads ${JSON.stringify(running.elapsed)}`);
  await screenshot(page, 'slow-progress');

  await page.getByRole('button', { name: 'Cancel' }).click();
  const got = await finished(page);
  check(got.state === 'cancelled', `after Cancel the call is ${got.state} (${got.status}), want cancelled`);
  check(got.status.startsWith('Cancelled after'), `the status reads ${JSON.stringify(got.status)}`);
  const values = await page.evaluate(() => window.progressValues);
  check(values.at(-1) < 200, `the progress bar reached ${values.at(-1)} of 200 before the cancel`);
  check(await page.getByRole('button', { name: 'Run' }).isEnabled(), 'Run is disabled after the cancel');
  await screenshot(page, 'slow-cancelled');
  emit({ event: 'cancelled', progress: values });
  const next = await lines.next();
  check(!next.done, 'the test closed stdin');
  return page;
}

// A call to completion, then one with arguments the schema refuses.
async function echo(page) {
  await page.locator('button.tool[data-tool="echo"]').click();
  const field = page.getByLabel('text');
  await field.fill('hello from the browser');
  await field.press('Enter');
  await expectResult(page, 'hello from the browser');
  await screenshot(page, 'echo-result');

  await field.fill('');
  await page.getByRole('button', { name: 'Run' }).click();
  const refused = await finished(page);
  check(refused.state === 'error', `echo without text ended ${refused.state}, want error`);
  check(refused.kind === 'HTTP 400 · invalid-arguments', `the problem reads ${JSON.stringify(refused.kind)}`);
  check(refused.errors.length > 0, 'the invalid-arguments problem lists no errors');
  await screenshot(page, 'echo-invalid');
}

async function tabTo(page, tool) {
  for (let i = 0; i < 40; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate((t) => document.activeElement?.dataset.tool === t, tool)) return;
  }
  throw new Error(`Tab never reached the tool ${tool}`);
}

// Image and audio content as data: URLs, and a tool's own error; tools
// picked through the filter.
async function content(page) {
  const pick = async (tool) => {
    await page.getByLabel('Filter by name').fill(tool.replace('test_', ''));
    check(await page.locator('#tools li:not([hidden])').count() === 1, `the filter ${tool} leaves more than one tool`);
    await page.locator(`button.tool[data-tool="${tool}"]`).click();
    await page.getByRole('button', { name: 'Run' }).click();
    return finished(page);
  };
  let got = await pick('test_image_content');
  check(got.state === 'done', `test_image_content ended ${got.state}`);
  check(await page.locator('#result img[src^="data:image/png;base64,"]').count() === 1, 'the image is not shown');
  got = await pick('test_audio_content');
  check(got.state === 'done', `test_audio_content ended ${got.state}`);
  check(await page.locator('#result audio[controls][src^="data:audio/wav;base64,"]').count() === 1, 'the audio is not shown');
  got = await pick('test_error_handling');
  check(got.state === 'tool-error', `test_error_handling ended ${got.state}, want tool-error`);
  check(got.kind === 'HTTP 422 · tool-error', `the problem reads ${JSON.stringify(got.kind)}`);
  check(got.texts.some((t) => t.includes('intentionally returns an error')), `the tool's error text is not shown: ${JSON.stringify(got.texts)}`);
  await screenshot(page, 'tool-error');
  await page.getByLabel('Filter by name').fill('');
}

// Tab to a tool, Enter to pick it, type, Enter to run.
async function keyboard(context) {
  const page = await open(context);
  await tabTo(page, 'echo');
  const outline = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
  check(outline !== 'none', 'the focused tool button shows no focus outline');
  await page.keyboard.press('Enter');
  check(await page.evaluate(() => document.activeElement?.dataset.arg === 'text'), 'Enter on the tool did not focus its first field');
  await page.keyboard.type('typed at the keyboard');
  await page.keyboard.press('Enter');
  await expectResult(page, 'typed at the keyboard');
  await screenshot(page, 'keyboard-echo');

  await page.close();
}

// The same for a long call, which Escape cancels.
async function keyboardCancel(context) {
  const page = await open(context);
  await tabTo(page, 'slow');
  await page.keyboard.press('Enter');
  await page.keyboard.type('20000');
  await watchProgress(page);
  await page.keyboard.press('Enter');
  await page.waitForFunction(advancedTwice);
  await page.keyboard.press('Escape');
  const got = await finished(page);
  check(got.state === 'cancelled', `after Escape the call is ${got.state}, want cancelled`);
  await screenshot(page, 'keyboard-cancelled');
  await page.close();
}

// A phone: the page fits the width, and a call works by touch.
async function phone(browser) {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  context.setDefaultTimeout(TIMEOUT);
  const page = await open(context, `${url}#echo`);
  await page.getByLabel('text').fill('hello from a phone');
  await page.getByRole('button', { name: 'Run' }).tap();
  await expectResult(page, 'hello from a phone');
  for (const width of [390, 360]) {
    await page.setViewportSize({ width, height: 844 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(overflow <= 0, `at ${width} px the page is ${overflow} px wider than the screen`);
  }
  await page.setViewportSize({ width: 390, height: 844 });
  await screenshot(page, 'phone');
  await context.close();
}

// Tools the demo does not have, listed through a route the test serves in
// place of the gateway's: a required boolean left unticked is sent as
// false; a tool the form cannot show has its schema on view; a local
// error hides the last call's result; a name that reorders text shows its
// controls; and one with nowhere to break keeps the list within its panel.
async function awkwardTools(context) {
  const page = watch(await context.newPage());
  const sent = [];
  await page.route('**/v1/tools', (route) => route.fulfill({
    contentType: 'application/json',
    body: JSON.stringify({ tools: [
      { name: 'flagged', inputSchema: { type: 'object', properties: { flag: { type: 'boolean' }, loud: { type: 'boolean' } }, required: ['flag'] } },
      { name: 'nested', inputSchema: { type: 'object', properties: { deep: { type: 'object', properties: { depth_marker: { type: 'integer' } } } } } },
      { name: '\u202Egnp.exe', inputSchema: { type: 'object' } },
      { name: 'x'.repeat(300), title: 'y'.repeat(300), inputSchema: { type: 'object' } },
    ] }),
  }));
  await page.route('**/v1/tools/flagged', (route) => {
    sent.push(route.request().postData());
    return route.fulfill({ contentType: 'application/json', body: JSON.stringify({ content: [{ type: 'text', text: 'ok' }] }) });
  });
  await page.goto(url);
  await page.locator('#tools button.tool').first().waitFor();

  const overflow = await page.evaluate(() => {
    const list = document.getElementById('tools');
    return list.scrollWidth - list.clientWidth;
  });
  check(overflow <= 0, `a long name makes the tool list ${overflow} px wider than its panel`);
  const rtl = await page.locator('#tools button.tool').nth(2).textContent();
  check(rtl.includes('[U+202E]'), `a name with a right-to-left override reads ${JSON.stringify(rtl)}`);

  await page.locator('button.tool[data-tool="flagged"]').click();
  await page.getByRole('button', { name: 'Run' }).click();
  await expectResult(page, 'ok');
  check(sent.length === 1 && sent[0] === '{"flag":false}', `the unticked required boolean sent ${JSON.stringify(sent)}, want {"flag":false}`);
  await page.getByRole('button', { name: 'Edit as JSON' }).click();
  await page.locator('#json').fill('{bad');
  await page.getByRole('button', { name: 'Run' }).click();
  check(await page.locator('#args-error').isVisible(), 'JSON that does not parse shows no error');
  check(await page.locator('#output').isHidden(), "the last call's result stays on view beside an error of the arguments");

  await page.locator('button.tool[data-tool="nested"]').click();
  check(await page.locator('#schema-view').evaluate((d) => d.open), "the schema of a tool the form cannot show is not on view");
  check((await page.locator('#schema').textContent()).includes('depth_marker'), 'the schema on view does not describe the arguments');
  await screenshot(page, 'awkward-tools');
  await page.close();
}

// The page behind a proxy that serves the gateway under a path prefix
// (nginx's location /gw/ { proxy_pass http://gateway/; }), played by a
// route that strips it: the page asks for what it needs relative to where
// it was loaded, so a call works there too.
async function underAPrefix(context) {
  const page = watch(await context.newPage());
  const base = new URL(url);
  await page.route(`${base.origin}/gw/**`, async (route) => {
    const target = new URL(route.request().url());
    target.pathname = target.pathname.slice('/gw'.length);
    await route.fulfill({ response: await route.fetch({ url: target.toString() }) });
  });
  await page.route(`${base.origin}/{ui,v1}/**`, (route) => route.abort());
  await page.goto(`${base.origin}/gw/#echo`);
  await page.getByLabel('text').fill('hello from under a prefix');
  await page.getByRole('button', { name: 'Run' }).click();
  await expectResult(page, 'hello from under a prefix');
  await page.close();
}

// A gateway that wants a token: the page asks for one, refuses a wrong
// one, and lists the tools with the right one.
async function auth(browser, authURL, token) {
  const context = await browser.newContext();
  context.setDefaultTimeout(TIMEOUT);
  const page = watch(await context.newPage());
  await page.goto(authURL);
  await page.locator('#auth').waitFor();
  await page.getByLabel('Bearer token').fill('not-the-token');
  await page.getByRole('button', { name: 'Use token' }).click();
  await page.waitForFunction(() => document.getElementById('auth-why').textContent.startsWith('The gateway did not accept'));
  await screenshot(page, 'auth-refused');
  await page.getByLabel('Bearer token').fill(token);
  await page.getByRole('button', { name: 'Use token' }).click();
  await page.locator('button.tool[data-tool="echo"]').click();
  check(await page.locator('#auth').isHidden(), 'the token form is still shown');
  await page.getByLabel('text').fill('hello with a token');
  await page.getByRole('button', { name: 'Run' }).click();
  await expectResult(page, 'hello with a token');
  await context.close();
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
    timeout: TIMEOUT,
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    context.setDefaultTimeout(TIMEOUT);
    const page = await slowThenCancel(context);
    await echo(page);
    await content(page);
    await keyboard(context);
    await keyboardCancel(context);
    await phone(browser);
    await awkwardTools(context);
    await underAPrefix(context);
    if (process.env.AUTH_URL) await auth(browser, process.env.AUTH_URL, process.env.AUTH_TOKEN);
    check(pageProblems.length === 0, `the page reported problems:\n${pageProblems.join('\n')}`);
  } finally {
    await browser.close();
  }
  emit({ event: 'done' });
  stdin.close();
}

main().catch((err) => {
  console.error(err.stack ?? String(err));
  process.exit(1);
});
