// openid-client (v6, on Node's Web Crypto) as an OAuth 2.0 machine client
// of Kiln: discovery, client_credentials with each client authentication
// method the discovery document lists, and introspection (RFC 7662) and
// revocation (RFC 7009) as an RFC client makes them (issue 21, items 6-10).
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import * as oidc from 'openid-client';
import { env, kilnAdmin, raw, show } from './lib.mjs';

const issuer = new URL(env.base);
const SCOPE = 'system/Patient.rs';

const basic = (id = env.clientId, secret = env.clientSecret) => oidc.discovery(issuer, id, undefined, oidc.ClientSecretBasic(secret));
const post = (id = env.clientId, secret = env.clientSecret) => oidc.discovery(issuer, id, undefined, oidc.ClientSecretPost(secret));

// fhirStatus is what the FHIR API answers a token: 200 while it is valid.
async function fhirStatus(accessToken) {
  const res = await raw('GET', '/fhir/Patient?_count=1', { headers: { Authorization: `Bearer ${accessToken}` } });
  return res.status;
}

// why turns openid-client's errors into messages that say what came back.
async function why(promise) {
  try {
    return await promise;
  } catch (err) {
    const parts = [err.name, err.message];
    if (err.status) parts.push(`HTTP ${err.status}`);
    if (err.error) parts.push(`error=${err.error}`);
    if (err instanceof oidc.WWWAuthenticateChallengeError) parts.push(`challenge ${JSON.stringify(err.cause)}`);
    else if (err.cause?.status) parts.push(`HTTP ${err.cause.status}`);
    throw new Error(parts.join(': ')); // the cause's stack says no more
  }
}

// The private_key_jwt client: a key pair of each algorithm SMART Backend
// Services names, made here; only the public halves are registered.
const jwt = { dir: '', id: '', keys: {} };

before(async () => {
  const rs = await crypto.subtle.generateKey({ name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-384' }, true, ['sign', 'verify']);
  const es = await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-384' }, true, ['sign', 'verify']);
  jwt.keys = { RS384: { key: rs.privateKey, kid: 'rc-rs384' }, ES384: { key: es.privateKey, kid: 'rc-es384' } };
  const pub = async (k, kid, alg) => ({ ...(await crypto.subtle.exportKey('jwk', k)), kid, alg, use: 'sig', key_ops: undefined, ext: undefined });
  const jwks = { keys: [await pub(rs.publicKey, 'rc-rs384', 'RS384'), await pub(es.publicKey, 'rc-es384', 'ES384')] };
  jwt.dir = await mkdtemp(join(tmpdir(), 'kiln-rc-jwks-'));
  const file = join(jwt.dir, 'jwks.json');
  await writeFile(file, JSON.stringify(jwks));
  const out = await kilnAdmin('client', 'add', '--name', 'rc-private-key-jwt', '--scopes', SCOPE, '--jwks', file);
  jwt.id = out.stdout.match(/client_id:\s*(\S+)/)?.[1];
  assert.ok(jwt.id, `kiln admin client add printed no client_id: ${out.stdout}`);
});

after(async () => {
  if (jwt.dir) await rm(jwt.dir, { recursive: true, force: true });
});

describe('openid-client', () => {
  test('discovery from the issuer', async () => {
    const md = (await why(basic())).serverMetadata();
    assert.equal(md.issuer, env.base);
    assert.equal(md.token_endpoint, `${env.base}/auth/token`);
    assert.ok(md.introspection_endpoint && md.revocation_endpoint, JSON.stringify(md));
    for (const m of ['client_secret_basic', 'client_secret_post', 'private_key_jwt']) {
      assert.ok(md.token_endpoint_auth_methods_supported?.includes(m), `${m} not advertised`);
    }
  });

  test('client_credentials with client_secret_basic', async () => {
    const tok = await why(oidc.clientCredentialsGrant(await basic(), { scope: SCOPE }));
    assert.equal(tok.token_type, 'bearer');
    assert.equal(tok.scope, SCOPE);
    assert.equal(await fhirStatus(tok.access_token), 200);
  });

  test('client_credentials with client_secret_post', async () => {
    const tok = await why(oidc.clientCredentialsGrant(await post(), { scope: SCOPE }));
    assert.equal(tok.scope, SCOPE);
    assert.equal(await fhirStatus(tok.access_token), 200);
  });

  // openid-client signs the assertion with aud = the issuer identifier.
  for (const alg of ['RS384', 'ES384']) {
    test(`client_credentials with private_key_jwt (${alg}, aud = issuer)`, async () => {
      const cfg = await why(oidc.discovery(issuer, jwt.id, undefined, oidc.PrivateKeyJwt(jwt.keys[alg])));
      const tok = await why(oidc.clientCredentialsGrant(cfg, { scope: SCOPE }));
      assert.equal(tok.scope, SCOPE);
      assert.equal(await fhirStatus(tok.access_token), 200);
    });
  }

  test('introspection (RFC 7662) by the client that holds the token', async () => {
    const cfg = await post();
    const tok = await why(oidc.clientCredentialsGrant(cfg, { scope: SCOPE }));
    const info = await why(oidc.tokenIntrospection(cfg, tok.access_token));
    assert.equal(info.active, true, JSON.stringify(info));
    assert.equal(info.client_id, env.clientId);
    assert.equal(info.scope, SCOPE);
  });

  test('introspection by another client does not describe the token', async () => {
    const tok = await why(oidc.clientCredentialsGrant(await post(), { scope: SCOPE }));
    let info;
    try {
      info = await oidc.tokenIntrospection(await post(env.otherId, env.otherSecret), tok.access_token);
    } catch (err) {
      // a refusal (401/403) reveals nothing either
      assert.ok([401, 403].includes(err.status ?? err.cause?.status), `${err.name}: ${err.message}`);
      return;
    }
    assert.deepEqual(info, { active: false }, 'another client learnt: ' + JSON.stringify(info));
  });

  test("introspection with another client's bearer token does not describe the token", async () => {
    const mine = await why(oidc.clientCredentialsGrant(await post(), { scope: SCOPE }));
    const theirs = await why(oidc.clientCredentialsGrant(await post(env.otherId, env.otherSecret), { scope: SCOPE }));
    const res = await raw('POST', '/auth/introspect', {
      headers: { Authorization: `Bearer ${theirs.access_token}`, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: mine.access_token }).toString(),
    });
    if (res.status === 200) assert.deepEqual(JSON.parse(res.body), { active: false }, show(res, 'introspect'));
    else assert.ok([401, 403].includes(res.status), show(res, 'introspect'));
  });

  test('revocation (RFC 7009) by the client that holds the token', async () => {
    const cfg = await post();
    const tok = await why(oidc.clientCredentialsGrant(cfg, { scope: SCOPE }));
    assert.equal(await fhirStatus(tok.access_token), 200);
    await why(oidc.tokenRevocation(cfg, tok.access_token));
    assert.equal(await fhirStatus(tok.access_token), 401, 'the revoked token still works');
  });

  test("revocation without client authentication leaves a client's token valid", async () => {
    const tok = await why(oidc.clientCredentialsGrant(await post(), { scope: SCOPE }));
    await raw('POST', '/auth/revoke', {
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: tok.access_token }).toString(),
    });
    assert.equal(await fhirStatus(tok.access_token), 200, 'an unauthenticated request revoked a client token');
  });

  test("revocation by another client leaves the token valid", async () => {
    const tok = await why(oidc.clientCredentialsGrant(await post(), { scope: SCOPE }));
    try {
      await oidc.tokenRevocation(await post(env.otherId, env.otherSecret), tok.access_token);
    } catch { /* a refusal is fine; what matters is the token */ }
    assert.equal(await fhirStatus(tok.access_token), 200, "another client revoked this client's token");
  });

  test('invalid_scope for a scope the client does not hold (400)', async () => {
    await assert.rejects(oidc.clientCredentialsGrant(await post(), { scope: 'system/Observation.rs' }), (err) => {
      assert.ok(err instanceof oidc.ResponseBodyError, `${err.name}: ${err.message}`);
      assert.equal(err.status, 400);
      assert.equal(err.error, 'invalid_scope');
      return true;
    });
  });

  // Tokens for the checks below come with client_secret_post, so that each
// check fails only for what it is about. Wrong secrets last, on the other
// client.
  test('invalid_client with client_secret_post: 401 with the OAuth JSON body, no Basic challenge', async () => {
    await assert.rejects(oidc.clientCredentialsGrant(await post(env.otherId, 'wrong-secret'), { scope: SCOPE }), (err) => {
      assert.ok(err instanceof oidc.ResponseBodyError, `${err.name}: ${err.message} ${JSON.stringify(err.cause ?? '')}`);
      assert.equal(err.status, 401);
      assert.equal(err.error, 'invalid_client');
      return true;
    });
  });

  test('invalid_client with client_secret_basic: 401, WWW-Authenticate: Basic and the OAuth JSON body', async () => {
    await assert.rejects(oidc.clientCredentialsGrant(await basic(env.otherId, 'wrong-secret'), { scope: SCOPE }), (err) => {
      const status = err.status ?? err.cause?.status;
      assert.equal(status, 401, `${err.name}: ${err.message}`);
      return true;
    });
    const res = await raw('POST', '/auth/token', {
      headers: {
        Authorization: 'Basic ' + Buffer.from(`${encodeURIComponent(env.otherId)}:wrong-secret`).toString('base64'),
        'Content-Type': 'application/x-www-form-urlencoded',
      },
      body: 'grant_type=client_credentials',
    });
    assert.equal(res.status, 401, show(res, 'POST /auth/token'));
    assert.match(String(res.headers['www-authenticate']), /^Basic/i);
    assert.equal(JSON.parse(res.body).error, 'invalid_client');
  });
});
