// <approval-card run="…" token="…" base-url="…">: the approval card of approval-resume (DESIGN.md §13).
//
// A plain ES module with no dependency and no build step. It reads the run with a decision token, shows the
// pending calls, and posts the person's click itself: Approve, Deny, and on write calls Deny with a reason
// (`variant`: propose another version; `skip`: do not propose it again). Beside Approve, "Allow for this
// conversation", and beside Deny, "Never in this conversation": the same decision, remembered for the run's later
// turns (`remember: "run"`, DESIGN.md §18), which then come back decided without a click. A pending call that a
// remembered decision would decide says so. After the click it shows the outcome and the text the model will read. It needs no inline script and, through a constructed stylesheet, no inline
// style, so a host page's Content-Security-Policy need only allow this script's origin (script-src) and the
// service (connect-src).
//
// Theme it with CSS custom properties on the element or any ancestor:
//   --approval-card-font, --approval-card-bg, --approval-card-fg, --approval-card-muted, --approval-card-border,
//   --approval-card-radius, --approval-card-accent, --approval-card-accent-fg, --approval-card-danger,
//   --approval-card-danger-fg, --approval-card-focus.
//
// Events (bubbling, composed): `approval-decided` (detail: the decision answer), `approval-error` (detail:
// {status, code, detail}, the problem the service answered, or status 0 when it could not be reached).

const STYLE = `
:host {
  display: block;
  font-family: var(--approval-card-font, system-ui, sans-serif);
  color: var(--approval-card-fg, #1b1b1f);
  background: var(--approval-card-bg, #ffffff);
  border: 1px solid var(--approval-card-border, #74777f);
  border-radius: var(--approval-card-radius, 8px);
  padding: 1rem;
  max-width: 40rem;
}
h2, h3 { margin: 0 0 .5rem; font-size: 1.1rem; }
h3 { font-size: 1rem; }
h2:focus, h3:focus { outline: 2px solid var(--approval-card-focus, #0b57d0); outline-offset: 2px; }
ul { list-style: none; margin: 0 0 1rem; padding: 0; }
li { border-top: 1px solid var(--approval-card-border, #74777f); padding: .5rem 0; }
.tool { font-weight: 600; font-family: ui-monospace, monospace; }
.effect { color: var(--approval-card-muted, #44474e); margin-left: .5rem; }
.rule { color: var(--approval-card-muted, #44474e); margin: .25rem 0 0; font-size: .875rem; }
pre { white-space: pre-wrap; word-break: break-word; margin: .25rem 0 0; font-size: .875rem; }
.actions { display: flex; flex-wrap: wrap; gap: .5rem; }
button {
  font: inherit; cursor: pointer; padding: .5rem 1rem; border-radius: var(--approval-card-radius, 8px);
  border: 1px solid var(--approval-card-border, #74777f);
  background: var(--approval-card-bg, #ffffff); color: var(--approval-card-fg, #1b1b1f);
}
button.approve {
  background: var(--approval-card-accent, #0b57d0); color: var(--approval-card-accent-fg, #ffffff);
  border-color: var(--approval-card-accent, #0b57d0);
}
button.deny {
  background: var(--approval-card-danger, #b3261e); color: var(--approval-card-danger-fg, #ffffff);
  border-color: var(--approval-card-danger, #b3261e);
}
button:focus-visible { outline: 3px solid var(--approval-card-focus, #0b57d0); outline-offset: 2px; }
button:disabled { cursor: progress; opacity: .7; }
.status { margin-top: 1rem; }
.error { color: var(--approval-card-danger, #b3261e); }
`;

// What a remembered decision that would decide a pending call says of it, by its verdict.
const RULES = {
  approve: 'A remembered decision would approve this call.',
  deny: 'A remembered decision would deny this call.',
};

const REASONS = {
  variant: 'Deny: propose another version',
  skip: 'Deny: do not propose this again',
};

// What a refusal means to the person who clicked, by the problem's `code`; others show the service's detail.
const REFUSALS = {
  second_approver_required: 'This run needs a second approver: you may deny it, but someone else must approve it.',
  decider_not_permitted: 'You may not decide this run.',
  token_expired: 'This approval link has expired. Reload the page to get a fresh one.',
  already_decided: 'This turn was already decided differently.',
  stale_turn: 'The request changed since it was shown. Reload to see the current one.',
  not_found: 'This run cannot be found, or you may not decide it.',
};

let sheet;
function styleSheet() {
  if (!sheet) {
    sheet = new CSSStyleSheet();
    sheet.replaceSync(STYLE);
  }
  return sheet;
}

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === 'class') node.className = value;
    else if (name === 'text') node.textContent = value;
    else node.setAttribute(name, value);
  }
  node.append(...children);
  return node;
}

export class ApprovalCard extends HTMLElement {
  static observedAttributes = ['run', 'token', 'base-url'];

  constructor() {
    super();
    this.attachShadow({ mode: 'open' });
    this.shadowRoot.adoptedStyleSheets = [styleSheet()];
    this.body = element('div');
    // Announced by screen readers when the outcome or a refusal appears.
    this.status = element('div', { class: 'status', role: 'status', 'aria-live': 'polite' });
    this.shadowRoot.append(this.body, this.status);
  }

  connectedCallback() {
    this.load();
  }

  attributeChangedCallback(_name, before, after) {
    if (this.isConnected && before !== null && before !== after) this.load();
  }

  get url() {
    const base = (this.getAttribute('base-url') || '').replace(/\/+$/, '');
    return `${base}/v1/runs/${encodeURIComponent(this.getAttribute('run') || '')}`;
  }

  async request(path, init = {}) {
    let response;
    try {
      response = await fetch(this.url + path, {
        ...init,
        credentials: 'omit',
        headers: { Authorization: `Bearer ${this.getAttribute('token') || ''}`, ...(init.headers || {}) },
      });
    } catch (error) {
      throw { status: 0, code: 'unreachable', detail: 'The approval service could not be reached.' };
    }
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw { status: response.status, code: body.code || '', detail: body.detail || '' };
    return body;
  }

  async load() {
    this.body.replaceChildren(element('p', { text: 'Loading the approval request…' }));
    this.status.replaceChildren();
    try {
      this.run = await this.request('');
      this.render();
    } catch (problem) {
      this.body.replaceChildren();
      this.fail(problem);
    }
  }

  render() {
    const run = this.run;
    const showArguments = run.privacy_level === 'full';
    const calls = run.turn.pending_calls.map((call) => {
      const item = element(
        'li',
        {},
        element('span', { class: 'tool', text: call.name }),
        element('span', { class: 'effect', text: call.effect === 'write' ? 'changes data' : 'reads data' }),
      );
      if (showArguments) item.append(element('pre', { text: call.arguments }));
      if (call.rule && RULES[call.rule.verdict]) item.append(element('p', { class: 'rule', text: RULES[call.rule.verdict] }));
      return item;
    });
    const heading = element('h2', { id: 'heading', text: 'The assistant asks for your approval' });
    const list = element('ul', { 'aria-labelledby': 'heading' }, ...calls);
    this.body.replaceChildren(heading, list);
    if (run.status !== 'waiting_for_approval') {
      this.body.append(element('p', { text: 'This request has been decided already.' }));
      return;
    }
    const hasWrite = run.turn.pending_calls.some((call) => call.effect === 'write');
    // "Never" denies with `skip`, as the model reads a "never" (DESIGN.md §18): do not propose it again.
    const buttons = [
      this.button('Approve', 'approve', { approved: true }),
      this.button('Allow for this conversation', 'approve', { approved: true, remember: 'run' }),
      this.button('Deny', 'deny', { approved: false }),
      this.button('Never in this conversation', 'deny', { approved: false, reason: 'skip', remember: 'run' }),
    ];
    if (hasWrite) {
      for (const [reason, label] of Object.entries(REASONS)) {
        buttons.push(this.button(label, '', { approved: false, reason }));
      }
    }
    this.actions = element('div', { class: 'actions', role: 'group', 'aria-label': 'Your decision' }, ...buttons);
    this.body.append(this.actions);
  }

  button(label, kind, decision) {
    const button = element('button', { type: 'button', class: kind, text: label });
    button.addEventListener('click', () => this.decide(decision, button));
    return button;
  }

  async decide(decision, clicked) {
    for (const button of this.actions.querySelectorAll('button')) button.disabled = true;
    clicked.setAttribute('aria-busy', 'true');
    try {
      const answer = await this.request('/decision', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ ...decision, turn_digest: this.run.turn.digest }),
      });
      this.actions.remove();
      this.outcome(answer, decision.remember === 'run');
      this.dispatchEvent(new CustomEvent('approval-decided', { detail: answer, bubbles: true, composed: true }));
    } catch (problem) {
      clicked.removeAttribute('aria-busy');
      for (const button of this.actions.querySelectorAll('button')) button.disabled = false;
      this.fail(problem);
    }
  }

  outcome(answer, remembered) {
    const approved = answer.decision.approved;
    const heading = element('h3', { tabindex: '-1', text: approved ? 'You approved the request.' : 'You declined the request.' });
    const kept = remembered
      ? [element('p', { class: 'remembered', text: approved
          ? 'These tools are allowed for the rest of this conversation.'
          : 'These tools will not be used for the rest of this conversation.' })]
      : [];
    // A result holding a tool's answer or edited arguments has no `content` where the run's privacy level shows
    // none (docs/design.md §13): the card says so rather than show an empty text.
    const results = answer.results.map((result) =>
      element(
        'li',
        {},
        element('span', { class: 'tool', text: result.tool }),
        element('span', { class: 'effect', text: result.outcome }),
        ...(result.content === undefined
          ? [element('p', { text: "The result is not shown at this run's privacy level." })]
          : [
              element('p', { text: 'The assistant will read:' }),
              element('pre', { class: 'model-text', text: result.content }),
            ]),
      ),
    );
    this.status.replaceChildren(heading, ...kept, element('ul', {}, ...results));
    heading.focus();
  }

  fail(problem) {
    const text = REFUSALS[problem.code] || problem.detail || 'The request failed.';
    const heading = element('h3', { tabindex: '-1', class: 'error', text: 'Not recorded' });
    const detail = element('p', { class: 'error', 'data-code': problem.code || '', text });
    this.status.replaceChildren(heading, detail);
    heading.focus();
    this.dispatchEvent(new CustomEvent('approval-error', { detail: problem, bubbles: true, composed: true }));
  }
}

if (!customElements.get('approval-card')) customElements.define('approval-card', ApprovalCard);
