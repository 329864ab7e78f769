// Two FHIR client libraries written by others, used as their READMEs say,
// against the live server: fhir-kit-client and the SMART JS client
// (fhirclient, through its Node entry point). Each operation is its own
// test; the fixtures they read are made with plain HTTP first, so one
// failing operation does not hide the others.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { before, describe, test } from 'node:test';
import { Client } from 'fhir-kit-client';
import { env, raw, show } from './lib.mjs';

const require = createRequire(import.meta.url);
const smart = require('fhirclient'); // its "main" is the Node entry point

// why turns a client's HTTP error into one that shows what the server said.
async function why(promise) {
  try {
    return await promise;
  } catch (err) {
    const data = err?.response?.data ?? err?.body;
    const detail = data ? ': ' + JSON.stringify(data).slice(0, 400) : '';
    throw new Error(`${err.message}${detail}`); // the cause adds only a stack
  }
}

const auth = { Authorization: `Bearer ${env.token}`, 'Content-Type': 'application/fhir+json', Accept: 'application/fhir+json' };

async function post(type, resource) {
  const res = await raw('POST', `/fhir/${type}`, { headers: auth, body: JSON.stringify(resource) });
  assert.equal(res.status, 201, show(res, `fixture POST /fhir/${type}`));
  return JSON.parse(res.body.toString('utf8'));
}

// A family name no other run shares, so counts are exact. The resources
// meet the national profiles the server validates every write against.
const family = `Rc${Date.now().toString(36)}`;
const patient = (given, birthDate = '1980-01-01') => ({
  resourceType: 'Patient',
  identifier: [{ system: 'urn:kiln:realclients', value: `${family}-${given}` }],
  name: [{ family, given: [given] }],
  gender: 'female',
  birthDate,
});
const observation = (subject, code) => ({
  resourceType: 'Observation',
  status: 'final',
  category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
  code: { coding: [{ system: 'http://loinc.org', code }] },
  subject: { reference: `Patient/${subject}` },
  effectiveDateTime: '2024-05-01T10:00:00Z',
  valueQuantity: { value: 70, unit: 'kg', system: 'http://unitsofmeasure.org', code: 'kg' },
});

const fx = {}; // fixture ids

before(async () => {
  fx.p1 = (await post('Patient', patient('One'))).id;
  fx.p2 = (await post('Patient', patient('Two'))).id;
  fx.p3 = (await post('Patient', patient('Three'))).id;
  fx.p4 = (await post('Patient', patient('Four'))).id; // deleted by fhir-kit-client
  fx.p5 = (await post('Patient', patient('Five'))).id; // deleted by fhirclient
  for (const code of ['29463-7', '8302-2', '8867-4']) await post('Observation', observation(fx.p1, code));
});

describe('fhir-kit-client', () => {
  const fk = new Client({ baseUrl: env.fhir, bearerToken: env.token });

  test('capabilityStatement', async () => {
    const cs = await why(fk.capabilityStatement());
    assert.equal(cs.resourceType, 'CapabilityStatement');
    assert.equal(cs.fhirVersion, '4.0.1');
  });

  test('CapabilityStatement rest.security: SMART-on-FHIR service and oauth-uris', async () => {
    const cs = await why(fk.capabilityStatement());
    const sec = cs.rest?.[0]?.security;
    assert.ok(sec, 'rest[0].security is missing');
    const codes = (sec.service ?? []).flatMap((s) => s.coding ?? []).map((c) => c.code);
    assert.ok(codes.includes('SMART-on-FHIR'), `security.service codes: ${JSON.stringify(codes)}`);
    const uris = (sec.extension ?? []).find((e) => e.url === 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris');
    assert.ok(uris, 'the oauth-uris extension is missing');
    const token = uris.extension?.find((e) => e.url === 'token')?.valueUri;
    assert.equal(token, `${env.base}/auth/token`);
  });

  test('create', async () => {
    const created = await why(fk.create({ resourceType: 'Patient', body: patient('Created') }));
    assert.equal(created.resourceType, 'Patient');
    assert.ok(created.id, 'no id');
    assert.equal(created.meta?.versionId, '1');
  });

  test('read', async () => {
    const p = await why(fk.read({ resourceType: 'Patient', id: fx.p1 }));
    assert.equal(p.id, fx.p1);
    assert.equal(p.name[0].family, family);
  });

  test('update', async () => {
    const p = await why(fk.read({ resourceType: 'Patient', id: fx.p2 }));
    const updated = await why(fk.update({ resourceType: 'Patient', id: fx.p2, body: { ...p, gender: 'male' } }));
    assert.equal(updated.gender, 'male');
    assert.equal(updated.meta.versionId, String(Number(p.meta.versionId) + 1));
  });

  test('patch (JSON Patch)', async () => {
    const patched = await why(fk.patch({ resourceType: 'Patient', id: fx.p3, jsonPatch: [{ op: 'replace', path: '/birthDate', value: '1990-12-31' }] }));
    assert.equal(patched.birthDate, '1990-12-31');
  });

  test('search + nextPage', async () => {
    const page1 = await why(fk.search({ resourceType: 'Patient', searchParams: { family, _count: 2 } }));
    assert.equal(page1.type, 'searchset');
    assert.equal(page1.entry?.length, 2);
    const page2 = await why(fk.nextPage({ bundle: page1 }) ?? Promise.reject(new Error('no next link on page 1')));
    assert.ok(page2.entry?.length >= 1, 'page 2 is empty');
    const ids = [...page1.entry, ...page2.entry].map((e) => e.resource.id);
    assert.equal(new Set(ids).size, ids.length, `a resource was on both pages: ${ids}`);
  });

  test('history', async () => {
    const h = await why(fk.history({ resourceType: 'Patient', id: fx.p1 }));
    assert.equal(h.resourceType, 'Bundle');
    assert.equal(h.type, 'history');
    assert.ok(h.entry?.length >= 1);
    assert.ok(h.entry.every((e) => e.resource?.id === fx.p1));
  });

  test('delete', async () => {
    await why(fk.delete({ resourceType: 'Patient', id: fx.p4 }));
    const res = await raw('GET', `/fhir/Patient/${fx.p4}`, { headers: auth });
    assert.equal(res.status, 410, show(res, 'read after delete'));
  });

  // batch() and transaction() post to baseUrl + '/' (issue 21, item 1).
  test('batch() (POST [base]/)', async () => {
    const out = await why(fk.batch({
      body: {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          { request: { method: 'GET', url: `Patient/${fx.p1}` } },
          { resource: patient('Batched'), request: { method: 'POST', url: 'Patient' } },
        ],
      },
    }));
    assert.equal(out.type, 'batch-response');
    assert.deepEqual(out.entry.map((e) => e.response.status.slice(0, 3)), ['200', '201']);
  });

  test('transaction() (POST [base]/)', async () => {
    const out = await why(fk.transaction({
      body: {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          { fullUrl: 'urn:uuid:8f1d0c9e-6a43-4d52-9a55-0c2e3b0c7a11', resource: patient('Transacted'), request: { method: 'POST', url: 'Patient' } },
          { resource: { ...observation('x', '29463-7'), subject: { reference: 'urn:uuid:8f1d0c9e-6a43-4d52-9a55-0c2e3b0c7a11' } }, request: { method: 'POST', url: 'Observation' } },
        ],
      },
    }));
    assert.equal(out.type, 'transaction-response');
    assert.deepEqual(out.entry.map((e) => e.response.status.slice(0, 3)), ['201', '201']);
    const patientId = out.entry[0].response.location.match(/Patient\/([^/]+)/)[1];
    const obsLoc = out.entry[1].response.location.replace(/\/_history\/.*$/, '');
    const obs = JSON.parse((await raw('GET', obsLoc.startsWith('http') ? obsLoc : `/fhir/${obsLoc}`, { headers: auth })).body);
    assert.equal(obs.subject.reference, `Patient/${patientId}`);
  });

  // fhir-kit-client 2.x takes the compartment through search(), which
  // calls compartmentSearch(): GET [base]/Patient/{id}/Observation.
  test('search in the Patient compartment', async () => {
    const b = await why(fk.search({ resourceType: 'Observation', compartment: { resourceType: 'Patient', id: fx.p1 }, searchParams: { _count: 10 } }));
    assert.equal(b.type, 'searchset');
    assert.equal(b.entry?.length, 3);
    assert.ok(b.entry.every((e) => e.resource.subject.reference === `Patient/${fx.p1}`));
  });

  test('operation $validate', async () => {
    const good = await why(fk.operation({ name: '$validate', resourceType: 'Patient', input: { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: patient('Valid') }] } }));
    assert.equal(good.resourceType, 'OperationOutcome');
    assert.ok(!good.issue?.some((i) => i.severity === 'error' || i.severity === 'fatal'), JSON.stringify(good.issue));
    // An invalid one is reported, not accepted (a 200 or a 4xx, both carry the outcome).
    let bad;
    try {
      bad = await fk.operation({ name: '$validate', resourceType: 'Patient', input: { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: { resourceType: 'Patient', gender: 'nonsense' } }] } });
    } catch (err) {
      bad = err.response?.data;
    }
    assert.equal(bad?.resourceType, 'OperationOutcome');
    assert.ok(bad.issue.some((i) => i.severity === 'error'), JSON.stringify(bad.issue));
  });
});

describe('fhirclient (SMART JS client, Node entry)', () => {
  // The Node entry wants the app's own request and response; a client made
  // from a known token never reads them, so minimal stand-ins do.
  const store = new Map();
  const storage = { get: async (k) => store.get(k), set: async (k, v) => store.set(k, v), unset: async (k) => store.delete(k) };
  const req = { headers: { host: '127.0.0.1' }, url: '/', socket: {} };
  const client = smart(req, {}, storage).client({ serverUrl: env.fhir, tokenResponse: { access_token: env.token, token_type: 'Bearer' } });

  test('getFhirVersion (reads /metadata)', async () => {
    assert.equal(await why(client.getFhirVersion()), '4.0.1');
  });

  test('create', async () => {
    const p = await why(client.create(patient('SmartCreated')));
    assert.ok(p.id);
  });

  test('request (read)', async () => {
    const p = await why(client.request(`Patient/${fx.p1}`));
    assert.equal(p.id, fx.p1);
  });

  test('update', async () => {
    const p = await why(client.request(`Patient/${fx.p2}`));
    const u = await why(client.update({ ...p, birthDate: '1970-06-15' }));
    assert.equal(u.birthDate, '1970-06-15');
  });

  test('patch', async () => {
    const u = await why(client.patch(`Patient/${fx.p3}`, [{ op: 'replace', path: '/gender', value: 'other' }]));
    assert.equal(u.gender, 'other');
  });

  test('request following next links (pageLimit 0, flat)', async () => {
    const all = await why(client.request(`Patient?family=${family}&_count=2`, { pageLimit: 0, flat: true }));
    assert.ok(Array.isArray(all));
    assert.ok(all.length >= 4, `${all.length} patients over all pages`);
  });

  test('delete', async () => {
    await why(client.delete(`Patient/${fx.p5}`));
    const res = await raw('GET', `/fhir/Patient/${fx.p5}`, { headers: auth });
    assert.equal(res.status, 410, show(res, 'read after delete'));
  });
});
