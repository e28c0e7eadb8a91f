// The chat page's own script: asks its backend for a decision token for the run the assistant is waiting on,
// loads the card from the service, and embeds it. No API key ever reaches the browser.

const run = new URLSearchParams(location.search).get('run');
const { token, base_url: baseUrl } = await (await fetch(`/token?run=${encodeURIComponent(run)}`)).json();
await import(`${baseUrl}/ui/approval-card.js`);
const card = document.createElement('approval-card');
card.setAttribute('run', run);
card.setAttribute('token', token);
card.setAttribute('base-url', baseUrl);
card.addEventListener('approval-decided', (event) => {
  document.body.dataset.decided = event.detail.decision.decided_by;
});
document.getElementById('approval').append(card);
