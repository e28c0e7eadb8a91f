// The browser test (TESTING.md): headless Debian Chromium, driven by playwright-core, loads the example chat page
// with the service running, and checks what a person clicking the card gets, what the service recorded, that a
// page on an origin no client allows cannot post, and the card's accessibility with axe-core.
//
// Run by tests/browser.sh, which starts the service and sets: SERVICE_URL, ADMIN_KEY, SIGNING_KEY (a PEM file),
// KID, CLIENT, HOST_PORT, OTHER_PORT, ARTIFACTS.

import assert from 'node:assert/strict';
import { readFile, mkdir } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';
import { startHost, mintToken } from './host.mjs';
import { importPKCS8 } from 'jose';

const env = process.env;
const service = env.SERVICE_URL;
const artifacts = env.ARTIFACTS;
await mkdir(artifacts, { recursive: true });
const axeSource = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

async function api(method, path, body) {
  const response = await fetch(service + path, {
    method,
    headers: { authorization: `Bearer ${env.ADMIN_KEY}`, 'content-type': 'application/json' },
    body: body && JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

const call = (callId, name, args) => ({ id: callId, type: 'function', function: { name, arguments: args } });

function run(id, extra = {}) {
  return {
    id,
    owner_uid: 7,
    privacy_level: 'full',
    messages: [
      { role: 'system', content: 'You edit pages.' },
      { role: 'user', content: 'Set the meta description.' },
      { role: 'assistant', content: null, tool_calls: [call('call_1', 'update_page_metadata', '{"page": 12, "description": "A page"}')] },
    ],
    tools: [{ name: 'update_page_metadata', effect: 'write' }],
    ...extra,
  };
}

const ADR_200 =
  'Error: approval_denied (decided_by: run_owner). The approval for tool "update_page_metadata" was declined by the ' +
  'user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined ' +
  'the approval themselves, not the system or an operator, and ask whether the change should be proposed again.';

async function accessibilityViolations(page) {
  await page.evaluate(axeSource);
  const results = await page.evaluate(() =>
    // eslint-disable-next-line no-undef
    axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'] } }),
  );
  return results.violations.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

assert.equal((await api('PUT', '/v1/users/7', { username: 'owner', is_admin: false, can_approve_others: false, disabled: false })).status, 200);
const plain = randomUUID();
const fourEyes = randomUUID();
assert.equal((await api('POST', '/v1/runs', run(plain))).status, 201);
assert.equal((await api('POST', '/v1/runs', run(fourEyes, { require_second_approver: true }))).status, 201);

// The runs whose turn the person decides for the rest of the conversation (DESIGN.md §18), and the turn that follows.
const allowed = randomUUID();
const never = randomUUID();
assert.equal((await api('POST', '/v1/runs', run(allowed))).status, 201);
assert.equal((await api('POST', '/v1/runs', run(never))).status, 201);
const nextTurn = {
  messages: [
    { role: 'user', content: 'Set the title too.' },
    { role: 'assistant', content: null, tool_calls: [call('call_2', 'update_page_metadata', '{"page": 12, "title": "A title"}')] },
  ],
};

/// The one rule of a run, checked to be the owner's live run-scope rule of `verdict` for the card's tool.
async function onlyRule(runId, verdict) {
  const listed = await api('GET', `/v1/runs/${runId}/rules`);
  assert.equal(listed.status, 200);
  assert.equal(listed.body.rules.length, 1, JSON.stringify(listed.body));
  const [rule] = listed.body.rules;
  assert.equal(rule.scope, 'run');
  assert.equal(rule.verdict, verdict);
  assert.equal(rule.tool, 'update_page_metadata');
  assert.equal(rule.created_by, 7);
  assert.equal(rule.live, true);
  return rule;
}

/// The next turn of the run, registered: decided at once by `rule`, no click.
async function nextTurnDecidedBy(runId, rule, approved) {
  const next = await api('POST', `/v1/runs/${runId}/turns`, nextTurn);
  assert.equal(next.status, 200, JSON.stringify(next.body));
  assert.notEqual(next.body.status, 'waiting_for_approval', JSON.stringify(next.body));
  assert.equal(next.body.turn.index, 1);
  assert.equal(next.body.decision.approved, approved);
  assert.equal(next.body.decision.decided_by, 'run_owner');
  assert.equal(next.body.decision.calls[0].rule_id, rule.id);
}

/// The name of the element focused inside the card's shadow root.
async function focusedInCard(page) {
  return page.locator('approval-card').evaluate((card) => card.shadowRoot.activeElement?.textContent ?? null);
}

const signingKeyPem = await readFile(env.SIGNING_KEY, 'utf8');
const hostSettings = { serviceUrl: service, signingKeyPem, kid: env.KID, client: env.CLIENT, uid: 7 };
const host = await startHost({ ...hostSettings, port: Number(env.HOST_PORT) });
const other = await startHost({ ...hostSettings, port: Number(env.OTHER_PORT) });
const hostUrl = `http://127.0.0.1:${env.HOST_PORT}`;

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const figures = [];
try {
  const page = await browser.newPage();
  const consoleErrors = [];
  page.on('console', (message) => message.type() === 'error' && consoleErrors.push(message.text()));

  // Deny on a run of the person chatting.
  await page.goto(`${hostUrl}/?run=${plain}`);
  const deny = page.getByRole('button', { name: 'Deny', exact: true });
  await deny.waitFor();
  await page.screenshot({ path: `${artifacts}/card-before.png`, fullPage: true });
  const before = await accessibilityViolations(page);
  assert.deepEqual(before, [], 'axe, before the click');
  const started = Date.now();
  await deny.click();
  const outcome = page.getByRole('heading', { name: 'You declined the request.' });
  await outcome.waitFor();
  figures.push(`deny click to outcome shown: ${Date.now() - started} ms`);
  assert.equal(await page.locator('approval-card pre.model-text').first().textContent(), ADR_200);
  assert.ok(await outcome.evaluate((node) => node.getRootNode().activeElement === node), 'focus moves to the outcome');
  await page.screenshot({ path: `${artifacts}/card-after-deny.png`, fullPage: true });
  const after = await accessibilityViolations(page);
  assert.deepEqual(after, [], 'axe, after the click');
  const events = await api('GET', `/v1/runs/${plain}/events`);
  assert.equal(events.body.approval_events.length, 1);
  const event = events.body.approval_events[0];
  assert.equal(event.decided_by, 'run_owner');
  assert.equal(event.decider_uid, 7);
  assert.equal(event.credential, 'token');
  assert.equal(event.token_kid, env.KID);
  const input = await api('GET', `/v1/runs/${plain}/model-input`);
  assert.equal(input.body.messages.at(-1).content, ADR_200);

  // Approve on a four-eyes run by its owner: refused, nothing recorded.
  await page.goto(`${hostUrl}/?run=${fourEyes}`);
  await page.getByRole('button', { name: 'Approve' }).click();
  const refusal = page.locator('approval-card [data-code="second_approver_required"]');
  await refusal.waitFor();
  await page.screenshot({ path: `${artifacts}/card-after-refused-approve.png`, fullPage: true });
  assert.deepEqual(await accessibilityViolations(page), [], 'axe, after a refusal');
  const untouched = await api('GET', `/v1/runs/${fourEyes}`);
  assert.equal(untouched.body.status, 'waiting_for_approval');
  assert.equal((await api('GET', `/v1/runs/${fourEyes}/events`)).body.approval_events.length, 0);
  assert.deepEqual(consoleErrors.filter((text) => !text.includes('403')), [], 'console errors');

  // "Allow for this conversation", reached and pressed with the keyboard beside Approve: the approval is recorded
  // with a run rule, and the run's next turn comes back decided by it without a click.
  await page.goto(`${hostUrl}/?run=${allowed}`);
  const approve = page.getByRole('button', { name: 'Approve', exact: true });
  const allow = page.getByRole('button', { name: 'Allow for this conversation' });
  await allow.waitFor();
  await page.screenshot({ path: `${artifacts}/card-remember-before.png`, fullPage: true });
  assert.deepEqual(await accessibilityViolations(page), [], 'axe, with the remember buttons');
  await approve.focus();
  await page.keyboard.press('Tab');
  assert.equal(await focusedInCard(page), 'Allow for this conversation', 'Tab from Approve reaches Allow');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'You approved the request.' }).waitFor();
  await page.getByText('These tools are allowed for the rest of this conversation.').waitFor();
  await page.screenshot({ path: `${artifacts}/card-after-allow.png`, fullPage: true });
  assert.deepEqual(await accessibilityViolations(page), [], 'axe, after Allow for this conversation');
  const allowedEvents = (await api('GET', `/v1/runs/${allowed}/events`)).body.approval_events;
  assert.equal(allowedEvents.length, 1);
  assert.equal(allowedEvents[0].approved, true);
  assert.equal(allowedEvents[0].credential, 'token');
  await nextTurnDecidedBy(allowed, await onlyRule(allowed, 'approve'), true);
  // A turn the rule covers in part waits; the card says which call the remembered decision would decide.
  const partly = await api('POST', `/v1/runs/${allowed}/turns`, {
    messages: [
      { role: 'user', content: 'And read page 13.' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          call('call_3', 'update_page_metadata', '{"page": 13, "title": "Another"}'),
          call('call_4', 'read_page', '{"page": 13}'),
        ],
      },
    ],
  });
  assert.equal(partly.status, 200, JSON.stringify(partly.body));
  assert.equal(partly.body.status, 'waiting_for_approval');
  await page.goto(`${hostUrl}/?run=${allowed}`);
  await page.getByRole('button', { name: 'Allow for this conversation' }).waitFor();
  assert.equal(await page.getByText('A remembered decision would approve this call.').count(), 1);
  await page.screenshot({ path: `${artifacts}/card-partly-remembered.png`, fullPage: true });
  assert.deepEqual(await accessibilityViolations(page), [], 'axe, with a remembered decision shown');

  // "Never in this conversation", beside Deny: the denial ("skip") is recorded with a deny rule, which decides the
  // next turn.
  await page.goto(`${hostUrl}/?run=${never}`);
  const denyHere = page.getByRole('button', { name: 'Deny', exact: true });
  const neverButton = page.getByRole('button', { name: 'Never in this conversation' });
  await neverButton.waitFor();
  await denyHere.focus();
  await page.keyboard.press('Tab');
  assert.equal(await focusedInCard(page), 'Never in this conversation', 'Tab from Deny reaches Never');
  await neverButton.click();
  await page.getByRole('heading', { name: 'You declined the request.' }).waitFor();
  await page.getByText('These tools will not be used for the rest of this conversation.').waitFor();
  await page.screenshot({ path: `${artifacts}/card-after-never.png`, fullPage: true });
  assert.deepEqual(await accessibilityViolations(page), [], 'axe, after Never in this conversation');
  const neverEvents = (await api('GET', `/v1/runs/${never}/events`)).body.approval_events;
  assert.equal(neverEvents.length, 1);
  assert.equal(neverEvents[0].approved, false);
  await nextTurnDecidedBy(never, await onlyRule(never, 'deny'), false);
  assert.deepEqual(consoleErrors.filter((text) => !text.includes('403')), [], 'console errors');

  // A page on an origin no client allows cannot post, even holding a valid token.
  const key = await importPKCS8(signingKeyPem, 'EdDSA');
  const token = await mintToken({ key, kid: env.KID, client: env.CLIENT, uid: 7, run: fourEyes });
  const stranger = await browser.newPage();
  await stranger.goto(`http://localhost:${env.OTHER_PORT}/?run=unused`);
  const digest = untouched.body.turn.digest;
  const outcomeOfPost = await stranger.evaluate(
    async ({ url, token, digest }) => {
      try {
        const response = await fetch(url, {
          method: 'POST',
          headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ approved: false, turn_digest: digest }),
        });
        return `answered ${response.status}`;
      } catch (error) {
        return `blocked: ${error.name}`;
      }
    },
    { url: `${service}/v1/runs/${fourEyes}/decision`, token, digest },
  );
  assert.equal(outcomeOfPost, 'blocked: TypeError', 'the preflight of a disallowed origin fails');
  assert.equal((await api('GET', `/v1/runs/${fourEyes}/events`)).body.approval_events.length, 0);
  console.log(`browser test passed; ${figures.join('; ')}; screenshots in ${artifacts}`);
} finally {
  await browser.close();
  host.close();
  other.close();
}
