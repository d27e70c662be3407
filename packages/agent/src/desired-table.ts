// The agent's desired table, after cilium/statedb's reconciler: one entry per resource key
// holding what the region should have (a resource or a tombstone), the version it was written
// at, and how reconciling it went. Writers (snapshot, watch, prune) only change entries; the
// work queue, told of every change, makes the target follow. Because an entry stays until it
// is reconciled (retried as long as needed), the watch cursor may advance as soon as an event
// is in the table.
//
// A desired resource is kept in its protobuf wire encoding (packed into a string, then against
// the desired resources' shared dictionary) and decoded when it is needed (a reconcile, prune,
// drift check): a decoded message took about 1.5 KB of heap, the wire encoding about its size
// (~130 B in B7), packed against the dictionary ~30 B.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { DesiredResourceSchema, ResourceTombstoneSchema, type DesiredResource, type ResourceTombstone } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { KeyedStrings } from "./keyed-strings.ts";
import { resourceKey } from "./keys.ts";
import { packBytes, unpackBytes } from "./packed.ts";
import { awaitsSecretEnvSeal, dropSecretEnvValues, heldSecretEnv, RegionSecretKeys, sealSecretEnv, withSecretEnvSeal } from "./sealed-secrets.ts";
import { SharedDictionary } from "./shared-dictionary.ts";

/** A desired resource's wire encoding, packed (see desiredResource()). */
export type EncodedResource = string;

/**
 * The dictionary every desired encoding is packed against: one per process, as what repeats
 * (a region's namespaces, registries, environment names) is the same for every table.
 */
const DICTIONARY = new SharedDictionary();

export type DesiredState = { kind: "upsert"; encoded: EncodedResource } | { kind: "delete"; tombstone: ResourceTombstone };

/** The resource an upsert wants, decoded (a new message on every call). */
export function desiredResource(desired: { encoded: EncodedResource }): DesiredResource {
  return fromBinary(DesiredResourceSchema, unpackBytes(DICTIONARY.unpack(desired.encoded)));
}

/** The table's form of `resource`: its secret env in the table's form (in place, see sealed-secrets.ts), then encoded. */
function encode(resource: DesiredResource, regionKeys: RegionSecretKeys): EncodedResource {
  sealSecretEnv(resource, regionKeys);
  return DICTIONARY.pack(packBytes(toBinary(DesiredResourceSchema, resource)));
}

export type EntryStatus = "pending" | "done" | "error";

/** What other parts keep per resource key in its entry (see DesiredTable.attachment()). */
export type Attachment = "observed" | "reported";

/**
 * The dictionary a key's attachments are packed against (they are one string, see
 * joinAttachments()): the observer's records repeat field values, separators and marks from one
 * resource to the next.
 */
const ATTACHMENTS_DICTIONARY = new SharedDictionary();

type Attachments = Record<Attachment, string | undefined>;

/**
 * A key's attachments as one packed string (undefined if it has none): a header character
 * (2 × (the reported digest's length + 1, or 0 if none) + 1 if there are observed records), the
 * reported digest, then the observed records. One string rather than two: a second string and
 * its field in the entry cost about 30 B per resource.
 */
function joinAttachments({ observed, reported }: Attachments): string | undefined {
  if (observed === undefined && reported === undefined) return undefined;
  const header = String.fromCharCode(2 * (reported === undefined ? 0 : reported.length + 1) + (observed === undefined ? 0 : 1));
  return ATTACHMENTS_DICTIONARY.pack([header, reported ?? "", observed ?? ""].join(""));
}

function splitAttachments(attached: string | undefined): Attachments {
  if (attached === undefined) return { observed: undefined, reported: undefined };
  const joined = ATTACHMENTS_DICTIONARY.unpack(attached);
  const header = joined.charCodeAt(0);
  const reportedLength = (header >> 1) - 1;
  return {
    reported: reportedLength < 0 ? undefined : joined.slice(1, 1 + reportedLength),
    observed: header & 1 ? joined.slice(1 + Math.max(0, reportedLength)) : undefined,
  };
}

/** Why an already applied version is applied again: the live object drifted, or a periodic refresh. */
/** Why a settled resource is applied again: an object deleted or modified, the periodic refresh, or a managed object of it that its manifests no longer include (an orphan). */
export type ReapplyReason = "deleted" | "modified" | "refresh" | "orphan";

/** The fields of an entry that are set only while a reconcile failed or a run is asked for. */
interface Unsettled {
  error: string | undefined;
  attempts: number;
  reapply: ReapplyReason | undefined;
  deletedDuringRun: boolean;
}

const SETTLED: Unsettled = { error: undefined, attempts: 0, reapply: undefined, deletedDuringRun: false };

/**
 * appliedAt is kept in ms since this moment: a small integer (a Smi, inside the entry) for the
 * first 24 days of a process, where ms since the epoch would be a 16-byte heap number per entry.
 */
const TIME_ORIGIN = Date.now();

/**
 * One key's entry. A class with every field set in the constructor (one object shape, all
 * fields in the object); the desired state held as the packed encoding or the tombstone itself
 * (`desired` wraps it when read); error, attempts, reapply and deletedDuringRun in an object of
 * their own that exists only while one of them is set. A literal with optional fields added
 * later and a `{ kind, encoded }` object per entry cost about 60 B more per resource.
 */
export class DesiredEntry {
  readonly key: string;
  /** The upsert's packed encoding, or the delete's tombstone. */
  #state: EncodedResource | ResourceTombstone;
  /** Region version the desired state was written at. */
  readonly version: number;
  status: EntryStatus = "pending";
  /** Version of the last successful apply of this key, if any. */
  appliedVersion: number | undefined;
  /** appliedAt - TIME_ORIGIN. */
  #appliedAfterOrigin: number | undefined;
  #unsettled: Unsettled | undefined;
  /**
   * The key's attachments, packed (joinAttachments()): the observer's cached records of the key's
   * objects and the reporter's digest of its last observation sent. Read and written through
   * DesiredTable.attachment() only.
   */
  attached: string | undefined;

  /** A new desired state of `key`, pending; the last apply and error carry over from `previous`. */
  constructor(key: string, desired: DesiredState, version: number, previous: DesiredEntry | undefined) {
    this.key = key;
    this.#state = desired.kind === "upsert" ? desired.encoded : desired.tombstone;
    this.version = version;
    this.error = previous?.error;
    this.appliedVersion = previous?.appliedVersion;
    this.#appliedAfterOrigin = previous && previous.#appliedAfterOrigin;
    this.attached = previous?.attached;
  }

  /** When the last successful apply of this key finished (ms since the epoch). */
  get appliedAt(): number | undefined {
    return this.#appliedAfterOrigin === undefined ? undefined : TIME_ORIGIN + this.#appliedAfterOrigin;
  }
  set appliedAt(at: number | undefined) {
    this.#appliedAfterOrigin = at === undefined ? undefined : at - TIME_ORIGIN;
  }

  /**
   * The error of the last failed reconcile. Kept when a newer desired state arrives and
   * cleared only by a successful one, so observers report it until the resource is fixed.
   */
  get error(): string | undefined {
    return this.#unsettled?.error;
  }
  set error(error: string | undefined) {
    this.#change({ error });
  }

  /** Failed reconciles of this version so far. */
  get attempts(): number {
    return this.#unsettled?.attempts ?? 0;
  }
  set attempts(attempts: number) {
    this.#change({ attempts });
  }

  /** Set by requestReapply(): the next run applies even though this version was applied. */
  get reapply(): ReapplyReason | undefined {
    return this.#unsettled?.reapply;
  }
  set reapply(reapply: ReapplyReason | undefined) {
    this.#change({ reapply });
  }

  /**
   * Set by noteDeleted(): an object of the resource was deleted while a run was due or in flight.
   * The reconciler clears it as a run starts; a run that succeeds with it set again applies once
   * more, as it may have written the object before the delete.
   */
  get deletedDuringRun(): boolean {
    return this.#unsettled?.deletedDuringRun ?? false;
  }
  set deletedDuringRun(deletedDuringRun: boolean) {
    this.#change({ deletedDuringRun });
  }

  #change(change: Partial<Unsettled>): void {
    const next = { ...SETTLED, ...this.#unsettled, ...change };
    const settled = next.error === undefined && next.attempts === 0 && next.reapply === undefined && !next.deletedDuringRun;
    this.#unsettled = settled ? undefined : next;
  }

  /** What the region should have (a new object on every read). */
  get desired(): DesiredState {
    return typeof this.#state === "string" ? { kind: "upsert", encoded: this.#state } : { kind: "delete", tombstone: this.#state };
  }

  /** The same desired resource in another table form (its secret values dropped or given back): no change to apply. */
  reencode(resource: DesiredResource, regionKeys: RegionSecretKeys): void {
    if (typeof this.#state !== "string") throw new Error(`${this.key}: a tombstone has no encoding`);
    this.#state = encode(resource, regionKeys);
  }
}

export class DesiredTable {
  readonly #entries = new Map<string, DesiredEntry>();
  readonly #onChange: (key: string) => void;
  /** The attachments of keys without an entry (objects nothing desires, keys deleted from the table). */
  readonly #detached = new Map<string, string>();
  /** The keys that open the secret values ctrl sealed for this region (the connection sets them before each stream). */
  readonly secretKeys = new RegionSecretKeys();

  /** `onChange(key)` is called after each entry whose desired state changed. */
  constructor(onChange: (key: string) => void) {
    this.#onChange = onChange;
  }

  get(key: string): DesiredEntry | undefined {
    return this.#entries.get(key);
  }

  entries(): IterableIterator<DesiredEntry> {
    return this.#entries.values();
  }

  get size(): number {
    return this.#entries.size;
  }

  /** A watch event: the resource as of `version`. Ignored if the entry is already as new. */
  upsert(resource: DesiredResource, version: number): void {
    const key = resourceKey(resource.type, resource.id);
    const entry = this.#entries.get(key);
    if (entry && entry.version >= version) return;
    this.#set(key, { kind: "upsert", encoded: encode(resource, this.secretKeys) }, version);
  }

  /** A watch event or a prune decision: the resource must not exist as of `version`. */
  remove(tombstone: ResourceTombstone, version: number): void {
    const key = resourceKey(tombstone.type, tombstone.id);
    const entry = this.#entries.get(key);
    if (entry && (entry.version >= version || entry.desired.kind === "delete")) return;
    this.#set(key, { kind: "delete", tombstone }, version);
  }

  /**
   * Starts receiving a full snapshot. Its resources are added to the stage as they arrive and
   * reach the table only through replaceAll(): a snapshot that never completes changes nothing.
   * Until then, only the stage's owner may change the table's desired states (the stage skips
   * storing resources the table already holds at the same version).
   */
  stage(): SnapshotStage {
    return new SnapshotStage(this);
  }

  /**
   * A complete snapshot read at `version`: it is authoritative (versions may even go back after
   * ctrl's database was restored). Entries the snapshot lacks become deletes; entries already at
   * the snapshot's state are left alone, so an unchanged resource is not applied again.
   */
  replaceAll(snapshot: SnapshotStage, version: number): void {
    for (const [key, { encoded, version: resourceVersion }] of snapshot.resources) {
      if (encoded) this.#set(key, { kind: "upsert", encoded }, resourceVersion);
    }
    for (const entry of [...this.#entries.values()]) {
      if (snapshot.resources.has(entry.key) || entry.desired.kind === "delete") continue;
      const { type, id, namespace } = desiredResource(entry.desired);
      this.#set(entry.key, { kind: "delete", tombstone: create(ResourceTombstoneSchema, { type, id, namespace, name: id }) }, version);
    }
  }

  /**
   * The strings one part keeps per key, held in the keys' entries: a key with an entry has its
   * string there, a key without one in a side map (empty in normal operation), never both. An
   * entry keeps its attachments when its desired state changes; a key that leaves the table
   * takes them to the side map, a key that enters it takes them back. Both parts' strings of a
   * key are one packed string (joinAttachments()).
   */
  attachment(slot: Attachment): KeyedStrings {
    const entries = this.#entries;
    const detached = this.#detached;
    const attached = (key: string) => {
      const entry = entries.get(key);
      return entry ? entry.attached : detached.get(key);
    };
    return {
      get: (key) => splitAttachments(attached(key))[slot],
      set(key, value) {
        const joined = joinAttachments({ ...splitAttachments(attached(key)), [slot]: value });
        const entry = entries.get(key);
        if (entry) entry.attached = joined;
        else if (joined === undefined) detached.delete(key);
        else detached.set(key, joined);
      },
      *entries() {
        for (const entry of entries.values()) {
          const value = splitAttachments(entry.attached)[slot];
          if (value !== undefined) yield [entry.key, value];
        }
        for (const [key, joined] of detached) {
          const value = splitAttachments(joined)[slot];
          if (value !== undefined) yield [key, value];
        }
      },
    };
  }

  /** Whether the table wants exactly this version of the resource already. */
  holds(key: string, version: number): boolean {
    const entry = this.#entries.get(key);
    return entry?.desired.kind === "upsert" && entry.version === version;
  }

  /**
   * Applies the entry's (already applied) desired state again, e.g. because the live object
   * drifted. Only for a resource that is desired and settled (done); otherwise a run is due anyway.
   */
  requestReapply(key: string, reason: ReapplyReason): boolean {
    const entry = this.#entries.get(key);
    if (entry?.desired.kind !== "upsert" || entry.status !== "done" || entry.reapply) return false;
    entry.reapply = reason;
    entry.status = "pending";
    this.#onChange(key);
    return true;
  }

  /**
   * An object of a resource that is not settled (a run due or in flight) was deleted, or one it
   * must not have appeared: see DesiredEntry.deletedDuringRun (the run applies once more).
   */
  noteDeleted(key: string): void {
    const entry = this.#entries.get(key);
    if (entry?.desired.kind === "upsert" && entry.status !== "done") entry.deletedDuringRun = true;
  }

  /** Runs a failed entry now rather than after its backoff, e.g. because the object in its way changed. */
  retryNow(key: string): boolean {
    if (this.#entries.get(key)?.status !== "error") return false;
    this.#onChange(key);
    return true;
  }

  /**
   * Records a successful reconcile of `version`. A finished delete leaves the table (it only
   * holds what should exist or is still to be removed).
   */
  markDone(key: string, version: number): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    if (entry.version !== version) {
      // A newer state arrived while this one was applied; it is queued already.
      if (entry.desired.kind === "upsert") {
        entry.appliedVersion = version;
        entry.appliedAt = Date.now();
      }
      entry.error = undefined;
      return;
    }
    if (entry.desired.kind === "delete") {
      this.#entries.delete(key);
      if (entry.attached !== undefined) this.#detached.set(entry.key, entry.attached);
      return;
    }
    entry.status = "done";
    entry.appliedVersion = version;
    entry.appliedAt = Date.now();
    entry.attempts = 0;
    entry.error = undefined;
    entry.reapply = undefined;
  }

  /**
   * After the desired state of `key` at `version` was applied: its secret values, if it holds
   * them, leave the table (dropSecretEnvValues()). Ignored if a newer state arrived.
   */
  dropSecretEnvValues(key: string, version: number): void {
    const entry = this.#entries.get(key);
    if (entry?.version !== version || entry.desired.kind !== "upsert") return;
    const resource = desiredResource(entry.desired);
    if (dropSecretEnvValues(resource)) entry.reencode(resource, this.secretKeys);
  }

  /**
   * Gives the desired state of `key` at `version`, whose secret values left once applied, the
   * values ctrl sealed again (`sealed`, GetSecretEnvSeals) until its next successful apply.
   * Returns the resource with them, or undefined if a newer state arrived (it comes with its own).
   */
  restoreSecretEnvValues(key: string, version: number, sealed: Uint8Array): DesiredResource | undefined {
    const entry = this.#entries.get(key);
    if (entry?.version !== version || entry.desired.kind !== "upsert") return undefined;
    const resource = desiredResource(entry.desired);
    withSecretEnvSeal(resource, sealed, this.secretKeys);
    entry.reencode(resource, this.secretKeys);
    return resource;
  }

  /** Records a failed reconcile of `version` (ignored if a newer state arrived meanwhile). */
  markError(key: string, version: number, error: string): void {
    const entry = this.#entries.get(key);
    if (!entry || entry.version !== version) return;
    entry.status = "error";
    entry.error = error;
    entry.attempts++;
  }

  /** Entries per status, for metrics. */
  counts(): Record<EntryStatus, number> {
    const counts = { pending: 0, done: 0, error: 0 };
    for (const entry of this.#entries.values()) counts[entry.status]++;
    return counts;
  }

  #set(key: string, desired: DesiredState, version: number): void {
    const previous = this.#entries.get(key);
    // The map keeps the key string it was first given: the new entry holds that one, not a copy.
    const entry = new DesiredEntry(previous?.key ?? key, desired, version, previous);
    if (!previous) {
      entry.attached = this.#detached.get(key);
      this.#detached.delete(key);
    }
    this.#entries.set(key, entry);
    this.#onChange(key);
  }
}

/** The versions of deployments whose secret values a snapshot lacks, and the seals ctrl answers with by id (GetSecretEnvSeals). */
export type SecretEnvSealFetch = (wanted: { id: string; version: bigint }[]) => Promise<ReadonlyMap<string, Uint8Array>>;

/** A full snapshot while it is received (DesiredTable.stage()). */
export class SnapshotStage {
  readonly #table: DesiredTable;
  /**
   * The snapshot's resources by key: version, and encoding unless the table already holds
   * that version (the common case of a periodic full sync: then nothing is stored but the key).
   */
  readonly resources = new Map<string, { version: number; encoded: EncodedResource | undefined }>();
  #added = 0;
  #removed = 0;
  /** The batches added so far, staged in order (addBatch()). */
  #staging: Promise<void> = Promise.resolve();

  constructor(table: DesiredTable) {
    this.#table = table;
  }

  /**
   * Adds a batch of the snapshot, in its order, once the secret values its deployments came
   * without (a page leaves them out unless the agent asked for them) are fetched in one call of
   * `fetch`: those the table holds under the same names and checksum are not asked for
   * (heldSecretEnv()). A deployment ctrl has no seal for (its version was replaced meanwhile;
   * the newer follows, values included) stays without: its apply fails, saying so, until the
   * newer version arrives. Batches are staged one at a time, in their order, so that the
   * table's encodings are packed in the order they came (the shared dictionary learns from the
   * first ones).
   *
   * The call starts at once, and is answered while the caller reads the next batch: this
   * resolves once the batch before this one is staged (so no more than two are held decoded),
   * and rejects with an earlier batch's failed fetch. staged() waits for this one too.
   */
  async addBatch(resources: readonly DesiredResource[], fetch: SecretEnvSealFetch): Promise<void> {
    const awaiting = resources.filter(
      (resource) =>
        awaitsSecretEnvSeal(resource) &&
        !this.#table.holds(resourceKey(resource.type, resource.id), Number(resource.version)) &&
        !this.#withHeldValues(resource),
    );
    const seals = awaiting.length > 0 ? fetch(awaiting.map(({ id, version }) => ({ id, version }))) : undefined;
    seals?.catch(() => {}); // awaited below, once the batches before are staged
    const before = this.#staging;
    this.#staging = (async () => {
      await before;
      const fetched = await seals;
      for (const resource of awaiting) {
        const sealed = fetched?.get(resource.id);
        if (sealed && resource.spec.case === "deployment") resource.spec.value.workload!.secretEnvSealed = sealed;
      }
      for (const resource of resources) this.add(resource);
    })();
    // Its failure is reported by the next addBatch() or staged(), whichever comes first.
    this.#staging.catch(() => {});
    await before;
  }

  /** Resolves once every batch added is staged; rejects with a failed fetch. */
  staged(): Promise<void> {
    return this.#staging;
  }

  add(resource: DesiredResource): void {
    const key = resourceKey(resource.type, resource.id);
    const version = Number(resource.version);
    this.resources.set(key, { version, encoded: this.#table.holds(key, version) ? undefined : encode(resource, this.#table.secretKeys) });
    this.#added++;
  }

  /** A resource deleted while the snapshot was read: it is not part of it (call once the batches before are staged()). */
  remove(tombstone: ResourceTombstone): void {
    this.resources.delete(resourceKey(tombstone.type, tombstone.id));
    this.#removed++;
  }

  /** Gives `resource` the values the table holds of it, if they are the same (heldSecretEnv()). */
  #withHeldValues(resource: DesiredResource): boolean {
    const entry = this.#table.get(resourceKey(resource.type, resource.id));
    return entry?.desired.kind === "upsert" && heldSecretEnv(resource, desiredResource(entry.desired));
  }

  /** Resources added, duplicates included (to check against the count ctrl announced). */
  get added(): number {
    return this.#added;
  }

  /** Removals received (to check against the count ctrl announced). */
  get removed(): number {
    return this.#removed;
  }
}
