import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PatchStrategy, setHeaderOptions, type KubernetesObject } from '@kubernetes/client-node';
import { expectApiError, startCluster, type Cluster } from '@flotilla/testkit/emulator';

const GVR = { group: 'cilium.io', version: 'v2', plural: 'ciliumnetworkpolicies' };

function policy(name: string, port = '8080'): KubernetesObject & { spec: unknown; metadata: { namespace: string } } {
  return {
    apiVersion: 'cilium.io/v2',
    kind: 'CiliumNetworkPolicy',
    metadata: { name, namespace: 'default', labels: { 'flotilla.dev/app': 'web' } },
    spec: {
      endpointSelector: { matchLabels: { app: 'web' } },
      ingress: [{ fromEndpoints: [{ matchLabels: { app: 'gateway' } }], toPorts: [{ ports: [{ port, protocol: 'TCP' }] }] }],
    },
  };
}

describe('CiliumNetworkPolicy', () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster();
  });
  after(() => c.emu.stop());

  it('works through CustomObjectsApi (create, get, list, apply, delete)', async () => {
    const created: any = await c.custom.createNamespacedCustomObject({ ...GVR, namespace: 'default', body: policy('allow-gw') });
    assert.equal(created.metadata.generation, 1);
    const got: any = await c.custom.getNamespacedCustomObject({ ...GVR, namespace: 'default', name: 'allow-gw' });
    assert.equal(got.spec.endpointSelector.matchLabels.app, 'web');

    const list: any = await c.custom.listNamespacedCustomObject({ ...GVR, namespace: 'default', labelSelector: 'flotilla.dev/app=web' });
    assert.equal(list.kind, 'CiliumNetworkPolicyList');
    assert.equal(list.items[0].kind, 'CiliumNetworkPolicy', 'custom resource list items keep apiVersion/kind');

    const applied: any = await c.custom.patchNamespacedCustomObject(
      { ...GVR, namespace: 'default', name: 'allow-gw', body: policy('allow-gw', '9090'), fieldManager: 'flotilla-agent', force: true },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    );
    assert.equal(applied.spec.ingress[0].toPorts[0].ports[0].port, '9090');
    assert.equal(applied.metadata.generation, 2);

    // Custom resources do not support strategic merge patch, as upstream.
    await expectApiError(
      c.custom.patchNamespacedCustomObject(
        { ...GVR, namespace: 'default', name: 'allow-gw', body: { metadata: { labels: { x: 'y' } } } },
        setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
      ),
      415,
    );

    await c.custom.deleteNamespacedCustomObject({ ...GVR, namespace: 'default', name: 'allow-gw' });
    await expectApiError(c.custom.getNamespacedCustomObject({ ...GVR, namespace: 'default', name: 'allow-gw' }), 404);
  });

  it('works through KubernetesObjectApi.patch with server-side apply (discovery of cilium.io/v2)', async () => {
    const created = await c.apply(policy('via-object-api'));
    assert.equal(created.metadata?.generation, 1);
    const again = await c.apply(policy('via-object-api'));
    assert.equal(again.metadata?.resourceVersion, created.metadata?.resourceVersion);
    const read = await c.objects.read({ apiVersion: 'cilium.io/v2', kind: 'CiliumNetworkPolicy', metadata: { name: 'via-object-api', namespace: 'default' } });
    assert.equal(read.metadata?.uid, created.metadata?.uid);
    assert.ok(c.emu.requestLog.some((e) => e.path === '/apis/cilium.io/v2' && e.method === 'GET'), 'client used discovery');

    // PUT without resourceVersion is not allowed for custom resources.
    const body: any = policy('via-object-api');
    const err = await expectApiError(c.objects.replace(body), 422);
    assert.match(err.message, /metadata\.resourceVersion: Invalid value: 0x0|must be specified for an update/);
  });

  it('cannot be created in a missing namespace', async () => {
    const p = policy('orphan');
    p.metadata.namespace = 'missing';
    const err = await expectApiError(c.apply(p), 404);
    assert.equal(err.message, 'namespaces "missing" not found');
  });
});
