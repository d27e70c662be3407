// Prune: after a complete snapshot, remove managed objects of this region that nothing desires
// any more (e.g. deleted while the agent was down). Objects are selected by the managed-by and
// region labels only, so unlabeled objects and other regions' objects are never touched.
import type { Logger } from "@flotilla/runtime";
import { create } from "@bufbuild/protobuf";
import { ResourceTombstoneSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { desiredResource, type DesiredTable } from "./desired-table.ts";
import type { AgentMetrics } from "./metrics.ts";
import type { ManagedObject, Target } from "./target.ts";

export interface PruneOptions {
  /** Largest fraction of the managed objects one prune may delete. Default 0.5. */
  maxFraction: number;
  /** Prune even beyond maxFraction. */
  force: boolean;
}

export interface PruneDeps {
  table: DesiredTable;
  target: Target;
  metrics: AgentMetrics;
  log: Logger;
  /**
   * The managed objects as the agent already knows them (the observer's cache), or undefined
   * when it does not: the prune then lists them through the target. Listing again what the
   * observer holds would double a restart's lists of the whole cluster. Iterated once; only the
   * orphans among them are kept.
   */
  managedObjects?: () => Promise<Iterable<ManagedObject> | undefined>;
}

export type PruneResult = { pruned: number; refused: boolean };

/**
 * Must run only after a complete snapshot replaced the table (`snapshotVersion`). Orphans whose
 * key is not desired become tombstones in the table, so their deletes go through the work queue
 * and can never race an apply of the same key. An orphan left in another namespace by a key that
 * is desired again is deleted directly: it is a different object than the one being applied.
 */
export async function prune({ table, target, metrics, log, managedObjects }: PruneDeps, snapshotVersion: number, options: PruneOptions): Promise<PruneResult> {
  const orphans: ManagedObject[] = [];
  let managed = 0;
  for (const object of (await managedObjects?.()) ?? (await target.listManaged())) {
    managed++;
    if (!isDesired(table, object)) orphans.push(object);
  }
  if (orphans.length === 0) return { pruned: 0, refused: false };
  if (!options.force && orphans.length > options.maxFraction * managed) {
    metrics.pruneRefused.inc();
    log.warn(
      `prune refused: ${orphans.length} of ${managed} managed objects are not desired, more than the ` +
        `safety valve's ${options.maxFraction * 100}% (force it to prune anyway)`,
      { version: snapshotVersion },
    );
    return { pruned: 0, refused: true };
  }
  const byResource = new Map<string, ManagedObject>();
  for (const object of orphans) byResource.set(`${object.key} ${object.namespace}/${object.name}`, object);
  for (const object of byResource.values()) {
    const { type, id, namespace, name } = object;
    const tombstone = create(ResourceTombstoneSchema, { type, id, namespace, name });
    if (table.get(object.key)?.desired.kind === "upsert") await target.delete(tombstone);
    else table.remove(tombstone, snapshotVersion);
  }
  metrics.pruned.inc(orphans.length);
  log.info(`prune: ${orphans.length} managed objects not desired, deleting them`, { version: snapshotVersion });
  return { pruned: orphans.length, refused: false };
}

/** Desired: the table wants the object's resource, in the object's namespace, under its name. */
function isDesired(table: DesiredTable, object: ManagedObject): boolean {
  const entry = table.get(object.key);
  if (entry?.desired.kind !== "upsert") return false;
  const { namespace, id } = desiredResource(entry.desired);
  return object.namespace === namespace && object.name === id;
}
