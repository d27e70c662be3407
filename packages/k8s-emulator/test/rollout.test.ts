import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { collectWatch, deployment, startCluster, waitFor, type Cluster } from '@flotilla/testkit/emulator';

function condition(d: any, type: string) {
  return d?.status?.conditions?.find((c: any) => c.type === type);
}

describe('rollout controller', () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster({ rolloutDelayMs: 150 });
  });
  after(() => c.emu.stop());

  it('reports progress, then availability, through MODIFIED events', async () => {
    const w = await collectWatch(c, '/apis/apps/v1/namespaces/default/deployments', { fieldSelector: 'metadata.name=ok', resourceVersion: c.emu.resourceVersion });
    const created = await c.apply(deployment('ok', { replicas: 3 }));
    const progressing = await waitFor(() => {
      const d = c.emu.get('apps/v1', 'Deployment', 'default', 'ok');
      return condition(d, 'Progressing')?.reason === 'ReplicaSetUpdated' && d;
    }, 1000, 'progressing');
    assert.equal((progressing as any).status.observedGeneration, 1);
    assert.equal((progressing as any).status.updatedReplicas, 0);

    const done = await waitFor(() => {
      const x = c.emu.get('apps/v1', 'Deployment', 'default', 'ok') as any;
      return condition(x, 'Progressing')?.reason === 'NewReplicaSetAvailable' && x;
    }, 1500, 'available');
    assert.deepEqual(
      { ...done.status, conditions: undefined },
      { observedGeneration: 1, replicas: 3, updatedReplicas: 3, readyReplicas: 3, availableReplicas: 3, conditions: undefined },
    );
    assert.equal(condition(done, 'Available').status, 'True');
    assert.equal(condition(done, 'Available').reason, 'MinimumReplicasAvailable');
    assert.equal(done.metadata.annotations['deployment.kubernetes.io/revision'], '1');
    assert.equal(done.metadata.generation, created.metadata?.generation, 'status writes do not bump generation');

    const typed = await c.apps.readNamespacedDeploymentStatus({ name: 'ok', namespace: 'default' });
    assert.equal(typed.status?.availableReplicas, 3);
    await waitFor(() => w.events.filter((e) => e.type === 'MODIFIED').length >= 2, 1000, 'MODIFIED events');
    w.abort();
  });

  it('never makes a failing image available', async () => {
    await c.apply(deployment('bad', { image: 'registry.example/app:fail-1' }));
    const d = await waitFor(() => {
      const x = c.emu.get('apps/v1', 'Deployment', 'default', 'bad') as any;
      return condition(x, 'Progressing')?.status === 'False' && x;
    }, 1500, 'deadline exceeded');
    assert.equal(condition(d, 'Progressing').reason, 'ProgressDeadlineExceeded');
    assert.equal(condition(d, 'Available').status, 'False');
    assert.equal(d.status.readyReplicas, 0);
    assert.equal(d.status.availableReplicas, 0);

    // Fixing the image rolls out a new revision that succeeds.
    await c.apply(deployment('bad', { image: 'registry.example/app:2.0' }));
    const fixed = await waitFor(() => {
      const x = c.emu.get('apps/v1', 'Deployment', 'default', 'bad') as any;
      return condition(x, 'Progressing')?.reason === 'NewReplicaSetAvailable' && x;
    }, 1500, 'fixed');
    assert.equal(fixed.status.observedGeneration, 2);
    assert.equal(fixed.metadata.annotations['deployment.kubernetes.io/revision'], '2');
  });

  it('scaled to zero: all zeros and Available', async () => {
    await c.apply(deployment('zero', { replicas: 0 }));
    const d = await waitFor(() => {
      const x = c.emu.get('apps/v1', 'Deployment', 'default', 'zero') as any;
      return condition(x, 'Progressing')?.reason === 'NewReplicaSetAvailable' && x;
    }, 1500, 'zero');
    assert.equal(d.status.replicas, 0);
    assert.equal(d.status.readyReplicas, 0);
    assert.equal(condition(d, 'Available').status, 'True');
  });
});
