// The HTTP conventions a browser app and ordinary clients rely on, checked
// on the wire with Node's own HTTPS client: CORS preflights and headers,
// HEAD, gzip, and a trailing slash on the FHIR base (issue 21, items 1-4).
import assert from 'node:assert/strict';
import { gunzipSync } from 'node:zlib';
import { before, describe, test } from 'node:test';
import { env, raw, show } from './lib.mjs';

const bearer = { Authorization: `Bearer ${env.token}` };
const fhirJSON = { ...bearer, 'Content-Type': 'application/fhir+json', Accept: 'application/fhir+json' };
let patientId;
// A Patient the national profile accepts (identifier, given name, birth date).
const patient = { resourceType: 'Patient', identifier: [{ system: 'urn:kiln:realclients', value: `head-${Date.now()}` }], name: [{ family: 'Headcheck', given: ['Http'] }], gender: 'male', birthDate: '1975-03-04' };

before(async () => {
  const res = await raw('POST', '/fhir/Patient', { headers: fhirJSON, body: JSON.stringify(patient) });
  assert.equal(res.status, 201, show(res, 'fixture POST /fhir/Patient'));
  patientId = JSON.parse(res.body).id;
});

const list = (h) => String(h ?? '').toLowerCase().split(',').map((s) => s.trim()).filter(Boolean);

// What a browser sends before a cross-origin POST with a bearer token.
const preflight = (origin, path = '/fhir/Patient', method = 'POST', headers = 'authorization,content-type') =>
  raw('OPTIONS', path, { headers: { Origin: origin, 'Access-Control-Request-Method': method, 'Access-Control-Request-Headers': headers } });

describe('CORS', () => {
  test('preflight OPTIONS /fhir/Patient from an allowed origin: 2xx with Access-Control-Allow-Origin', async () => {
    const res = await preflight(env.allowedOrigin);
    assert.ok(res.status >= 200 && res.status < 300, show(res, 'OPTIONS /fhir/Patient'));
    assert.equal(res.headers['access-control-allow-origin'], env.allowedOrigin);
    const methods = list(res.headers['access-control-allow-methods']);
    assert.ok(methods.includes('post'), `Access-Control-Allow-Methods: ${res.headers['access-control-allow-methods']}`);
    const allowed = list(res.headers['access-control-allow-headers']);
    for (const h of ['authorization', 'content-type']) assert.ok(allowed.includes(h), `Access-Control-Allow-Headers lacks ${h}: ${allowed}`);
    assert.ok(list(res.headers.vary).includes('origin'), `Vary: ${res.headers.vary}`);
  });

  test('preflight allows Prefer, If-Match, If-None-Exist, If-None-Match', async () => {
    const res = await preflight(env.allowedOrigin, '/fhir/Patient', 'PUT', 'authorization,content-type,prefer,if-match,if-none-exist,if-none-match');
    assert.ok(res.status >= 200 && res.status < 300, show(res, 'OPTIONS /fhir/Patient'));
    const allowed = list(res.headers['access-control-allow-headers']);
    for (const h of ['prefer', 'if-match', 'if-none-exist', 'if-none-match']) assert.ok(allowed.includes(h), `Access-Control-Allow-Headers lacks ${h}: ${allowed}`);
  });

  test('preflight from an origin not in --cors-origins: no Access-Control-Allow-Origin', async () => {
    const res = await preflight(env.otherOrigin);
    assert.equal(res.headers['access-control-allow-origin'], undefined, `ACAO ${res.headers['access-control-allow-origin']} for ${env.otherOrigin}`);
  });

  test('preflight OPTIONS /auth/token from an allowed origin: 2xx with Access-Control-Allow-Origin', async () => {
    const res = await preflight(env.allowedOrigin, '/auth/token', 'POST', 'content-type');
    assert.ok(res.status >= 200 && res.status < 300, show(res, 'OPTIONS /auth/token'));
    assert.equal(res.headers['access-control-allow-origin'], env.allowedOrigin);
  });

  test('GET with an allowed Origin: Access-Control-Allow-Origin and exposed ETag, Location', async () => {
    const res = await raw('GET', `/fhir/Patient/${patientId}`, { headers: { ...bearer, Origin: env.allowedOrigin } });
    assert.equal(res.status, 200, show(res, 'GET /fhir/Patient/{id}'));
    assert.equal(res.headers['access-control-allow-origin'], env.allowedOrigin);
    const exposed = list(res.headers['access-control-expose-headers']);
    for (const h of ['etag', 'location', 'content-location', 'last-modified', 'x-request-id']) assert.ok(exposed.includes(h), `Access-Control-Expose-Headers lacks ${h}: ${exposed}`);
  });
});

describe('HEAD', () => {
  test('HEAD /fhir/Patient/{id} answers like GET without a body', async () => {
    const get = await raw('GET', `/fhir/Patient/${patientId}`, { headers: bearer });
    const head = await raw('HEAD', `/fhir/Patient/${patientId}`, { headers: bearer });
    assert.equal(head.status, 200, show(head, 'HEAD /fhir/Patient/{id}'));
    assert.equal(head.body.length, 0);
    assert.equal(head.headers.etag, get.headers.etag);
    assert.equal(head.headers['content-type'], get.headers['content-type']);
  });

  test('HEAD /fhir/Patient (search) answers 200 without a body', async () => {
    const head = await raw('HEAD', '/fhir/Patient?_count=1', { headers: bearer });
    assert.equal(head.status, 200, show(head, 'HEAD /fhir/Patient'));
    assert.equal(head.body.length, 0);
    assert.match(String(head.headers['content-type']), /application\/fhir\+json/);
  });
});

describe('gzip', () => {
  test('Accept-Encoding: gzip on /fhir/metadata gives Content-Encoding: gzip', async () => {
    const res = await raw('GET', '/fhir/metadata', { headers: { 'Accept-Encoding': 'gzip' } });
    assert.equal(res.status, 200, show(res, 'GET /fhir/metadata'));
    assert.equal(res.headers['content-encoding'], 'gzip', `Content-Encoding: ${res.headers['content-encoding']}, ${res.body.length} bytes`);
    assert.ok(list(res.headers.vary).includes('accept-encoding'), `Vary: ${res.headers.vary}`);
    const cs = JSON.parse(gunzipSync(res.body));
    assert.equal(cs.resourceType, 'CapabilityStatement');
  });

  test('no Accept-Encoding: the body is not compressed', async () => {
    const res = await raw('GET', '/fhir/metadata', { headers: { 'Accept-Encoding': 'identity' } });
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-encoding'], undefined);
    assert.equal(JSON.parse(res.body).resourceType, 'CapabilityStatement');
  });
});

describe('trailing slash on the FHIR base', () => {
  for (const path of ['/fhir/metadata/', '/fhir/Patient/']) {
    test(`GET ${path} means the same as without the slash`, async () => {
      const res = await raw('GET', path, { headers: fhirJSON });
      assert.equal(res.status, 200, show(res, `GET ${path}`));
      assert.match(JSON.parse(res.body).resourceType, /^(CapabilityStatement|Bundle)$/);
    });
  }
});
