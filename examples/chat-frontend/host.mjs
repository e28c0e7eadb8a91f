// A minimal host backend for a chat frontend that embeds <approval-card>.
//
// It serves the chat page and, at GET /token?run=…, mints a decision token for the person logged in (here a fixed
// uid: a real host takes it from its session) with the Ed25519 key whose public half is registered on its API
// client (`approval-resume clients token-key add`). The browser never sees an API key.
//
// Run: SERVICE_URL=http://127.0.0.1:8080 SIGNING_KEY=key.pem KID=k1 CLIENT=chat USER_UID=7 PORT=3000 node host.mjs

import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { SignJWT, importPKCS8 } from 'jose';

const here = fileURLToPath(new URL('.', import.meta.url));

/// Mints a token: `sub` the user, `run` the one run it may decide, five minutes of life (at most 15 are accepted).
export async function mintToken({ key, kid, client, uid, run }) {
  return new SignJWT({ run })
    .setProtectedHeader({ alg: 'EdDSA', kid })
    .setIssuer(client)
    .setAudience('approval-resume')
    .setSubject(String(uid))
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(key);
}

/// Starts the host on `port`; resolves to the server once it listens.
export async function startHost({ port, serviceUrl, signingKeyPem, kid, client, uid, host = '127.0.0.1' }) {
  const key = await importPKCS8(signingKeyPem, 'EdDSA');
  const files = {
    '/': ['index.html', 'text/html; charset=utf-8'],
    '/app.js': ['app.js', 'text/javascript; charset=utf-8'],
  };
  // No inline script or style anywhere: the page runs under a strict policy, as a chat frontend should.
  const policy = [
    "default-src 'self'",
    `script-src 'self' ${serviceUrl}`,
    `connect-src 'self' ${serviceUrl}`,
    "style-src 'self'",
    "img-src 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
  const server = createServer(async (request, response) => {
    const url = new URL(request.url, `http://${request.headers.host}`);
    if (url.pathname === '/token') {
      const run = url.searchParams.get('run');
      const token = await mintToken({ key, kid, client, uid, run });
      response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      response.end(JSON.stringify({ token, base_url: serviceUrl }));
      return;
    }
    if (url.pathname === '/favicon.ico') {
      response.writeHead(204).end();
      return;
    }
    const file = files[url.pathname];
    if (!file) {
      response.writeHead(404).end();
      return;
    }
    const body = await readFile(`${here}/${file[0]}`);
    response.writeHead(200, { 'content-type': file[1], 'content-security-policy': policy });
    response.end(body);
  });
  await new Promise((resolve) => server.listen(port, host, resolve));
  return server;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const env = process.env;
  const server = await startHost({
    port: Number(env.PORT || 3000),
    serviceUrl: env.SERVICE_URL || 'http://127.0.0.1:8080',
    signingKeyPem: await readFile(env.SIGNING_KEY || 'key.pem', 'utf8'),
    kid: env.KID || 'k1',
    client: env.CLIENT || 'chat',
    uid: Number(env.USER_UID || 7),
  });
  console.log(`chat frontend on http://127.0.0.1:${server.address().port}/?run=RUN_ID`);
}
