// The approval links end to end (DESIGN.md §20): mails through a real SMTP server, their links opened and clicked
// in headless Debian Chromium (playwright-core), the pages checked with axe-core, what the service recorded read
// back through the API, and the mail sender kept apart from the decision path while the SMTP server is away.
//
// Run by tests/links/run.sh, which starts the service (PUBLIC_URL=SERVICE_URL, SMTP_URL at SMTP_PORT with
// STARTTLS required) and sets: SERVICE_URL, ADMIN_KEY, ARTIFACTS, SMTP_PYTHON, SMTP_PORT, SMTP_CERT, SMTP_KEY,
// SMTP_PIDFILE, MAILDIR, MAIL_FROM_ADDRESS. This script starts and stops the SMTP server (smtp_server.py) itself.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium } from 'playwright-core';

const env = process.env;
const service = env.SERVICE_URL;
const artifacts = env.ARTIFACTS;
const maildir = env.MAILDIR;
await mkdir(artifacts, { recursive: true });
await mkdir(maildir, { recursive: true });
const axeSource = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

let checks = 0;
function check(what) {
  checks += 1;
  console.log(`ok ${checks} - ${what}`);
}

// ---- The SMTP server ------------------------------------------------------------------------------------------

let smtp = null;

async function startSmtp() {
  const child = spawn(env.SMTP_PYTHON, [new URL('./smtp_server.py', import.meta.url).pathname, env.SMTP_PORT, env.SMTP_CERT, env.SMTP_KEY, maildir], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await writeFile(env.SMTP_PIDFILE, String(child.pid));
  let seen = '';
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk) => {
      seen += chunk;
      if (seen.includes('ready')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`the SMTP server ended (${code}) before it was ready`)));
  });
  smtp = child;
}

async function stopSmtp() {
  const ended = once(smtp, 'exit');
  smtp.kill('SIGTERM');
  await ended;
  smtp = null;
  await rm(env.SMTP_PIDFILE, { force: true });
}

async function mails() {
  const names = (await readdir(maildir)).filter((name) => name.endsWith('.json')).sort();
  return Promise.all(names.map(async (name) => JSON.parse(await readFile(`${maildir}/${name}`, 'utf8'))));
}

/// The mails about `runId` once at least `count` have arrived (none of another run's; the body names the run).
async function mailsFor(runId, count, seconds) {
  const until = Date.now() + seconds * 1000;
  for (;;) {
    const found = (await mails()).filter((mail) => mail.body.includes(runId));
    if (found.length >= count) return found;
    if (Date.now() > until) throw new Error(`${found.length} of ${count} mails about run ${runId} within ${seconds} s`);
    await sleep(100);
  }
}

/// The one link of a mail: on a line of its own, to this service's page for `runId`.
function linkOf(mail, runId) {
  const lines = mail.body.split(/\r?\n/).map((line) => line.trim());
  const links = lines.filter((line) => line.startsWith(`${service}/approve/`));
  assert.equal(links.length, 1, `one link line in the mail:\n${mail.body}`);
  assert.match(links[0], new RegExp(`^${service.replace(/[.]/g, '\\.')}/approve/${runId}/[A-Za-z0-9_-]{43}$`));
  return links[0];
}

// ---- The API ----------------------------------------------------------------------------------------------------

async function api(method, path, body) {
  const response = await fetch(service + path, {
    method,
    headers: { authorization: `Bearer ${env.ADMIN_KEY}`, 'content-type': 'application/json' },
    body: body && JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

async function metric(result) {
  const response = await fetch(`${service}/metrics`, { headers: { authorization: `Bearer ${env.ADMIN_KEY}` } });
  assert.equal(response.status, 200);
  const line = (await response.text()).split('\n').find((l) => l.startsWith(`mails_total{result="${result}"}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

const OWNER = { uid: 1, username: 'olivia', email: 'olivia@links.test' };
const APPROVER = { uid: 2, username: 'arne', email: 'arne@links.test' };
const NO_ADDRESS = { uid: 3, username: 'nadia' };

async function putUser(user, canApproveOthers) {
  const answer = await api('PUT', `/v1/users/${user.uid}`, {
    username: user.username,
    is_admin: false,
    can_approve_others: canApproveOthers,
    disabled: false,
    ...(user.email ? { email: user.email } : {}),
  });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  assert.equal(answer.body.email ?? null, user.email ?? null);
}

const call = (callId, name, args) => ({ id: callId, type: 'function', function: { name, arguments: args } });

async function register(tool, args, extra = {}) {
  const id = randomUUID();
  const answer = await api('POST', '/v1/runs', {
    id,
    owner_uid: OWNER.uid,
    privacy_level: 'full',
    messages: [
      { role: 'system', content: 'You edit pages.' },
      { role: 'user', content: 'Please change the page.' },
      { role: 'assistant', content: null, tool_calls: [call('call_1', tool.name, args)] },
    ],
    tools: [tool],
    ...extra,
  });
  assert.equal(answer.status, 201, JSON.stringify(answer.body));
  assert.equal(answer.body.status, 'waiting_for_approval');
  return { id, answer: answer.body };
}

const run = async (id) => (await api('GET', `/v1/runs/${id}`)).body;

// ---- The page -----------------------------------------------------------------------------------------------------

async function accessibilityViolations(page) {
  await page.evaluate(axeSource);
  const results = await page.evaluate(() =>
    // eslint-disable-next-line no-undef
    axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'] } }),
  );
  return results.violations.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

function assertPageHeaders(response) {
  const headers = response.headers();
  assert.equal(headers['cache-control'], 'no-store');
  assert.equal(headers['referrer-policy'], 'same-origin');
  assert.equal(headers['x-frame-options'], 'DENY');
  assert.match(headers['content-security-policy'], /default-src 'none'/);
}

/// Opens `url` and answers the page once its stylesheet has loaded (the page has no script of its own).
async function open(page, url, status = 200) {
  const response = await page.goto(url, { waitUntil: 'load' });
  assert.equal(response.status(), status, await page.content());
  assertPageHeaders(response);
  return response;
}

/// Clicks the form's button `action` and waits for the page the 303 leads to.
async function click(page, action) {
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'GET' && r.url().includes('?decided')),
    page.locator(`form[method="post"] button[name="action"][value="${action}"]`).click(),
  ]);
  await page.waitForLoadState('load');
  assert.equal(response.status(), 200);
  assertPageHeaders(response);
}

const bodyText = (page) => page.locator('body').innerText();

// ---- The suite ----------------------------------------------------------------------------------------------------

await startSmtp();
await putUser(OWNER, false);
await putUser(APPROVER, true);
await putUser(NO_ADDRESS, true);
check('users put with their addresses, the answers show them');

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const context = await browser.newContext({ javaScriptEnabled: true });
const page = await context.newPage();

try {
  // 1. A registration that notifies the owner and an approver (and one without an address): one mail each.
  const canary = `CANARY-${randomUUID()}`;
  const slug = `spring-sale-${randomUUID().slice(0, 8)}`;
  const args = JSON.stringify({ page_slug: slug, meta_description: canary });
  const tool = { name: 'update_page_metadata', effect: 'write' };
  const first = await register(tool, args, { notify: [OWNER.uid, APPROVER.uid, NO_ADDRESS.uid] });
  assert.deepEqual(first.answer.notify, { queued: [OWNER.uid, APPROVER.uid], skipped: [{ uid: NO_ADDRESS.uid, reason: 'no_email' }] });
  check('registration with notify: the owner and the approver queued, the person without an address skipped (no_email)');

  const firstMails = await mailsFor(first.id, 2, 15);
  await sleep(2000); // the sender polls every 0.5 s: a second mail to anybody would be here by now
  const settled = (await mails()).filter((mail) => mail.body.includes(first.id));
  assert.equal(settled.length, 2, `mails about the first run: ${settled.map((m) => m.rcpt_tos).join(' ')}`);
  assert.deepEqual(settled.map((mail) => mail.rcpt_tos).sort(), [[APPROVER.email], [OWNER.email]]);
  check('exactly one mail per notified person for the turn');
  const linkFor = {};
  for (const mail of firstMails) {
    const [address] = mail.rcpt_tos;
    assert.equal(mail.tls, true, 'the mail came over STARTTLS');
    assert.equal(mail.mail_from, env.MAIL_FROM_ADDRESS);
    assert.ok(mail.to.includes(address), mail.to);
    assert.equal(mail.content_type, 'text/plain');
    assert.ok(mail.subject.includes(tool.name), mail.subject);
    assert.ok(mail.body.includes(tool.name), mail.body);
    assert.ok(mail.body.includes(OWNER.username), 'the mail names who started the run');
    for (const secret of [canary, slug, 'page_slug', 'meta_description', args]) {
      assert.ok(!mail.raw.includes(secret), `the mail holds ${secret}:\n${mail.raw}`);
      assert.ok(!mail.body.includes(secret), `the mail's body holds ${secret}:\n${mail.body}`);
    }
    linkFor[address] = linkOf(mail, first.id);
  }
  assert.notEqual(linkFor[OWNER.email], linkFor[APPROVER.email]);
  check('each mail came over STARTTLS from MAIL_FROM, names the tool and the owner, holds a link of its own and no argument (canary absent)');

  // The owner's link, opened three times (mail scanners do): nothing is decided.
  for (let visit = 1; visit <= 3; visit += 1) {
    await open(page, linkFor[OWNER.email]);
    const form = await bodyText(page);
    assert.ok(form.includes(`You decide as ${OWNER.username}`), form);
    assert.ok(form.includes(canary), 'the page shows the arguments at privacy level full (the canary is real)');
  }
  assert.equal((await run(first.id)).status, 'waiting_for_approval');
  check('the link opened three times with JavaScript on: the page shows the arguments (canary), the run still waits');
  await page.screenshot({ path: `${artifacts}/owner-form.png`, fullPage: true });
  assert.deepEqual(await accessibilityViolations(page), [], 'axe, the form');
  check('axe: no violations on the form');

  await click(page, 'deny');
  const denied = await run(first.id);
  assert.equal(denied.status, 'resumed');
  assert.equal(denied.decision.approved, false);
  assert.equal(denied.decision.decided_by, 'run_owner');
  assert.equal(denied.decision.decider_uid, OWNER.uid);
  const adr200 =
    'Error: approval_denied (decided_by: run_owner). The approval for tool "update_page_metadata" was declined by the ' +
    'user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined ' +
    'the approval themselves, not the system or an operator, and ask whether the change should be proposed again.';
  assert.equal(denied.results[0].content, adr200);
  const outcome = await bodyText(page);
  assert.ok(outcome.includes('Denied by you.'), outcome);
  assert.ok(outcome.includes(adr200), outcome);
  assert.ok(!outcome.includes(canary) && !outcome.includes(slug), 'the outcome page shows no argument');
  check('Deny clicked: the run resumed, decided_by run_owner; the page says "Denied by you." and the text the model reads');
  await page.screenshot({ path: `${artifacts}/owner-denied.png`, fullPage: true });
  assert.deepEqual(await accessibilityViolations(page), [], 'axe, the outcome');
  check('axe: no violations on the outcome page');

  // The approver's mail link now shows the outcome only.
  await open(page, linkFor[APPROVER.email]);
  const other = await bodyText(page);
  assert.ok(other.includes('Denied by the person who started the run.'), other);
  assert.equal(await page.locator('form[method="post"]').count(), 0);
  assert.ok(!other.includes(canary), 'the outcome page shows no argument');
  check("the approver's link after the owner's denial: \"Denied by the person who started the run.\", no form, no argument");

  // 2. A link made through the API for the approver, on a call the worker runs: Approve releases it.
  const workerTool = { name: 'publish_page', effect: 'write', executor: 'worker' };
  const second = await register(workerTool, JSON.stringify({ page_slug: slug }));
  const revoked = await api('POST', `/v1/runs/${second.id}/links`, { uid: APPROVER.uid });
  assert.equal(revoked.status, 201, JSON.stringify(revoked.body));
  assert.equal((await api('DELETE', `/v1/runs/${second.id}/links/${revoked.body.id}`)).status, 204);
  await open(page, revoked.body.url, 410);
  assert.ok((await bodyText(page)).includes('Link revoked'), await bodyText(page));
  check('a link made through the API and revoked: 204, its page 410 "Link revoked"');
  const made = await api('POST', `/v1/runs/${second.id}/links`, { uid: APPROVER.uid });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  assert.deepEqual(Object.keys(made.body).sort(), ['expires_at', 'id', 'url']);
  assert.ok(made.body.url.startsWith(`${service}/approve/${second.id}/`), made.body.url);
  assert.ok(Date.parse(made.body.expires_at) > Date.now());
  await open(page, made.body.url);
  assert.ok((await bodyText(page)).includes(`You decide as ${APPROVER.username}`));
  assert.equal((await run(second.id)).status, 'waiting_for_approval');
  await click(page, 'approve');
  const approved = await run(second.id);
  assert.equal(approved.status, 'released');
  assert.equal(approved.decision.approved, true);
  assert.equal(approved.decision.decided_by, 'other_user');
  assert.equal(approved.decision.decider_uid, APPROVER.uid);
  assert.deepEqual(approved.released_calls.map((c) => c.tool), [workerTool.name]);
  assert.ok((await bodyText(page)).includes('Approved by you.'), await bodyText(page));
  await page.screenshot({ path: `${artifacts}/approver-approved.png`, fullPage: true });
  check('Approve clicked on an API-made link for the approver: the worker call released, decided_by other_user');

  // 3. The SMTP server away: decisions answer as fast as ever, and the mail goes out once it is back.
  const retriedBefore = await metric('retried');
  await stopSmtp();
  const third = await register(tool, args, { notify: [APPROVER.uid] });
  assert.deepEqual(third.answer.notify, { queued: [APPROVER.uid], skipped: [] });
  const latencies = [];
  for (let i = 0; i < 5; i += 1) {
    const other = await register(tool, args);
    const started = performance.now();
    const answer = await api('POST', `/v1/runs/${other.id}/decision`, {
      approved: false,
      decider_uid: OWNER.uid,
      turn_digest: other.answer.turn.digest,
    });
    latencies.push(performance.now() - started);
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
  }
  console.log(`# deny latencies with the SMTP server away (ms): ${latencies.map((l) => l.toFixed(1)).join(' ')}`);
  assert.ok(Math.max(...latencies) < 500, `a deny took ${Math.max(...latencies)} ms`);
  check('SMTP server away: five denies on other runs answered, each under 500 ms');
  for (const until = Date.now() + 10_000; (await metric('retried')) <= retriedBefore; ) {
    assert.ok(Date.now() < until, 'no failed attempt counted while the SMTP server was away');
    await sleep(200);
  }
  assert.equal((await mails()).filter((mail) => mail.body.includes(third.id)).length, 0);
  check('the mail attempted while the SMTP server was away failed and was counted retried');
  await startSmtp();
  const backAt = Date.now();
  const [late] = await mailsFor(third.id, 1, 30);
  console.log(`# the held-back mail arrived ${((Date.now() - backAt) / 1000).toFixed(1)} s after the SMTP server was back`);
  assert.deepEqual(late.rcpt_tos, [APPROVER.email]);
  await open(page, linkOf(late, third.id));
  assert.ok((await bodyText(page)).includes(`You decide as ${APPROVER.username}`));
  check('SMTP server back on the same port: the held-back mail arrived, and its link opens the form');

  // 4. The count of sent mails covers every mail received; none was sent twice.
  await sleep(1000);
  const all = await mails();
  const perTurn = new Map();
  for (const mail of all) {
    const key = `${mail.body.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/)?.[0]} ${mail.rcpt_tos}`;
    perTurn.set(key, (perTurn.get(key) ?? 0) + 1);
  }
  assert.deepEqual([...perTurn.values()].filter((n) => n > 1), [], 'a person got two mails for one turn');
  assert.equal(all.length, 3);
  const sent = await metric('sent');
  assert.ok(sent >= all.length, `mails_total{result="sent"} ${sent} < ${all.length} received`);
  check(`/metrics: mails_total{result="sent"} ${sent} >= ${all.length} mails received, each person one mail per turn`);

  // 5. A username with line breaks (the host application's, which may hold anything but NUL) adds no header and no
  // line to a mail, and the sender goes on: before the fix its display name made lettre panic, which ended the sender.
  const MALLORY = { uid: 4, username: 'mallory\r\nBcc: victim@evil.test', email: 'mallory@links.test' };
  await putUser(MALLORY, true);
  const crafted = await register(tool, args, { notify: [MALLORY.uid] });
  assert.deepEqual(crafted.answer.notify, { queued: [MALLORY.uid], skipped: [] });
  const [toMallory] = await mailsFor(crafted.id, 1, 15);
  assert.deepEqual(toMallory.rcpt_tos, [MALLORY.email]);
  assert.ok(!/\r?\nBcc:/i.test(toMallory.raw.split(/\r?\n\r?\n/)[0]), `a Bcc header in:\n${toMallory.raw}`);
  const after = await register(tool, args, { notify: [APPROVER.uid] });
  const [still] = await mailsFor(after.id, 1, 15);
  assert.deepEqual(still.rcpt_tos, [APPROVER.email]);
  check('a username with line breaks: its mail has no header of its own making, and the next mail still goes out');
} finally {
  await browser.close();
  if (smtp) await stopSmtp();
}
console.log(`${checks} passed, 0 failed`);
