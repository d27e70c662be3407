// The observer: a resilient list+watch (client-go's reflector) of the objects this agent manages
// in its region, kept in a local cache that the reporter and drift detection read.
//
// * List (paged), then watch from the list's resourceVersion with bookmarks and a server-side
//   timeout; a watch that ends cleanly resumes from the last resourceVersion seen.
// * The cache holds reduced objects (cached-object.ts: the fields status, drift and applies
//   read, one packed string per object, found by resource key); the event handler still sees
//   each full object as it arrives.
// * 410 Gone (the resourceVersion left the server's watch history) → relist. A relist diffs
//   against the cache, so objects that changed or vanished meanwhile are still reported.
// * Errors back off exponentially with jitter; a watch without any event or bookmark for 3× the
//   expected bookmark interval is restarted (the inactivity watchdog).
import type { Logger } from "@flotilla/runtime";
import { backoffDelay, sleep, type BackoffOptions } from "./backoff.ts";
import { Watchdog } from "./watchdog.ts";
import { ObjectCache, resourceKeyOf, type CachedObject } from "./cached-object.ts";
import type { KeyedStrings } from "./keyed-strings.ts";
import { describeObject, managedSelector, secretEnvChecksumOf, type KubeObject } from "./manifests.ts";
import { statusCodeOf, type KubeClient, type WatchEvent } from "./kube-api.ts";
import { parseResourceKey } from "./keys.ts";
import type { LiveObject, LiveObjects, ManagedObject } from "./target.ts";
import type { WatchedKind } from "./watched-kinds.ts";

/** Why a watch was restarted (the `reason` label of flotilla_agent_observer_restarts_total). */
export type RestartReason = "closed" | "gone" | "inactive" | "error";

/** One change of a cached object. */
export interface ObjectChange {
  kind: WatchedKind;
  /** Resource key from the object's labels ("deployment/web"), if it names one. */
  key: string | undefined;
  /** The full object as the API server sent it; undefined for a deletion. */
  object: KubeObject | undefined;
  /** The cached (reduced, see cached-object.ts) object before the change, if there was one. */
  previous: KubeObject | undefined;
  /** The digest of what the agent applies that `object` holds (held.ts), if it holds it; undefined for a deletion. */
  held: string | undefined;
}

export interface ObserverOptions {
  kubeClient: KubeClient;
  region: string;
  kinds: readonly WatchedKind[];
  /** The API server's bookmark interval; 3× without any event or bookmark restarts the watch. */
  bookmarkIntervalMs: number;
  /** Server-side timeout of each watch request. */
  watchTimeoutSeconds: number;
  /** Backoff after failed lists and watches. */
  backoff: BackoffOptions;
  onChange: (change: ObjectChange) => void;
  /**
   * The digest of what the agent applies to `object` (a full object of resource `key`) if the
   * object holds it (held.ts); `previous` is what the cache held at its place. Kept with the
   * cached object. Without it, no object is known to hold anything.
   */
  held?: (object: KubeObject, key: string | undefined, previous: CachedObject | undefined) => string | undefined;
  /** Where the cache keeps each resource key's records (see ObjectCache); default: a map of its own. */
  records?: KeyedStrings;
  onRestart: (reason: RestartReason) => void;
  log: Logger;
}

const LIST_PAGE_SIZE = 500;

export class Observer {
  readonly #watchers: KindWatcher[];
  readonly #cache: ObjectCache;
  /**
   * Resolves once the first list of every kind has finished, listed or failed (client-go's
   * WaitForCacheSync, without waiting for a cluster that does not answer): reconciles that wait
   * for it find the objects already there in the cache.
   */
  readonly firstListed: Promise<void>;

  constructor(options: ObserverOptions) {
    this.#cache = new ObjectCache(options.kinds, options.records);
    this.#watchers = options.kinds.map((kind) => new KindWatcher(options, kind, this.#cache));
    this.firstListed = Promise.all(this.#watchers.map((w) => w.firstListed)).then(() => {});
  }

  /** Whether `kind` was listed once (before that, an absent object is unknown, not missing). */
  isSynced(kind: WatchedKind): boolean {
    return this.#watcher(kind)?.isSynced ?? false;
  }

  /**
   * The known resourceVersion and held digest of each cached object of resource `key`, by
   * describeObject() name; undefined until every kind was listed (an object missing from the
   * cache is unknown until then, not absent).
   */
  liveObjects(key: string): LiveObjects | undefined {
    if (!this.#watchers.every((w) => w.isSynced)) return undefined;
    const live: LiveObjects = new Map();
    for (const watcher of this.#watchers) {
      for (const { object, held } of watcher.cachedOf(key)) {
        const found: LiveObject = { resourceVersion: object.metadata.resourceVersion as string, held };
        if (object.kind === "Deployment") found.referencesSecretEnv = secretEnvChecksumOf(object) !== undefined;
        live.set(describeObject(object), found);
      }
    }
    return live;
  }

  /** The cached (reduced, see cached-object.ts) object, if it exists (and the kind is watched). */
  get(kind: WatchedKind, namespace: string, name: string): KubeObject | undefined {
    return this.#watcher(kind)?.get(namespace, name);
  }

  /** Cached objects of `kind` that belong to resource `key`. */
  objectsOf(kind: WatchedKind, key: string): KubeObject[] {
    return this.#watcher(kind)?.objectsOf(key) ?? [];
  }

  /** Resource keys of all cached objects of `kind`. */
  keys(kind: WatchedKind): IterableIterator<string> {
    return this.#watcher(kind)?.keys() ?? [].values();
  }

  /**
   * The cached objects of every watched kind as a target's listManaged() would list them (the
   * observer lists and watches only this region's managed objects), read from the cache as they
   * are iterated (one at a time: at 200,000 objects an array of them cost tens of MB at the
   * moment of a restart's highest memory); undefined while a kind has not been listed yet: its
   * objects are then unknown, not absent.
   */
  managedObjects(): Iterable<ManagedObject> | undefined {
    if (!this.#watchers.every((w) => w.isSynced)) return undefined;
    return this.#managedObjects();
  }

  *#managedObjects(): Generator<ManagedObject> {
    for (const { kind: watched } of this.#watchers) {
      const { apiVersion, kind } = watched;
      for (const { key, namespace, name } of this.#cache.keyed(watched)) {
        const { type, id } = parseResourceKey(key);
        if (type !== undefined) yield { type, id, key, apiVersion, kind, namespace, name };
      }
    }
  }

  /** Runs until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    await Promise.all(this.#watchers.map((w) => w.run(signal)));
  }

  #watcher(kind: WatchedKind): KindWatcher | undefined {
    return this.#watchers.find((w) => w.kind.kind === kind.kind && w.kind.apiVersion === kind.apiVersion);
  }
}

/** A watch that ended: how, and the error if it failed. */
type WatchEnd = { reason: Exclude<RestartReason, "error"> } | { reason: "error"; error: unknown };

/** List+watch of one kind, with its cache (cached-object.ts). */
class KindWatcher {
  readonly kind: WatchedKind;
  isSynced = false;
  readonly #firstListed = Promise.withResolvers<void>();
  readonly #options: ObserverOptions;
  readonly #selector: string;
  readonly #cache: ObjectCache;
  #resourceVersion: string | undefined;

  /** `cache` is shared by the watchers of all kinds. */
  constructor(options: ObserverOptions, kind: WatchedKind, cache: ObjectCache) {
    this.kind = kind;
    this.#cache = cache;
    this.#options = options;
    this.#selector = managedSelector(options.region);
  }

  get(namespace: string, name: string): KubeObject | undefined {
    return this.#cache.get(this.kind, namespace, name);
  }

  objectsOf(key: string): KubeObject[] {
    return this.#cache.objectsOf(this.kind, key);
  }

  cachedOf(key: string): CachedObject[] {
    return this.#cache.cachedOf(this.kind, key);
  }

  /** See Observer.firstListed. */
  get firstListed(): Promise<void> {
    return this.#firstListed.promise;
  }

  keys(): IterableIterator<string> {
    return this.#cache.keys(this.kind);
  }

  async run(signal: AbortSignal): Promise<void> {
    const { onRestart, backoff, log } = this.#options;
    let failures = 0;
    while (!signal.aborted) {
      let end: WatchEnd;
      try {
        if (this.#resourceVersion === undefined) {
          try {
            await this.#relist();
          } finally {
            this.#firstListed.resolve();
          }
        }
        end = await this.#watchOnce(signal);
      } catch (error) {
        end = { reason: "error", error };
      }
      if (signal.aborted) break;
      if (end.reason === "gone") this.#resourceVersion = undefined;
      onRestart(end.reason);
      if (end.reason === "error") {
        const delay = backoffDelay(failures++, backoff);
        if (failures <= 3 || failures % 10 === 0) log.warn(`observer ${this.kind.kind}: ${describeError(end.error)} (retry in ${Math.round(delay)} ms)`);
        await sleep(delay, signal);
      } else {
        failures = 0;
      }
    }
  }

  /**
   * Lists every managed object and reports what differs from the cache. Each item goes into the
   * cache as it arrives (neither a page nor the full list of 100,000 objects is held at once); cached objects
   * the list did not return are removed at the end.
   */
  async #relist(): Promise<void> {
    const { apiVersion, kind } = this.kind;
    const listed = new Set<string>();
    let continueToken: string | undefined;
    let resourceVersion: string | undefined;
    do {
      const page = await this.#options.kubeClient.list(
        this.kind.path,
        { labelSelector: this.#selector, limit: LIST_PAGE_SIZE, continue: continueToken },
        (item) => {
          // List items of built-in types come without apiVersion and kind.
          listed.add(this.#store({ ...item, apiVersion, kind } as KubeObject));
        },
      );
      resourceVersion = page.resourceVersion;
      continueToken = page.continue || undefined;
    } while (continueToken);
    const gone: [string, string][] = [];
    for (const location of this.#cache.locations(this.kind)) if (!listed.has(location.join("/"))) gone.push(location);
    for (const [namespace, name] of gone) this.#remove({ metadata: { namespace, name } });
    this.#resourceVersion = resourceVersion;
    this.isSynced = true;
  }

  /** One watch request from the current resourceVersion, until it ends. */
  async #watchOnce(signal: AbortSignal): Promise<WatchEnd> {
    const { bookmarkIntervalMs, watchTimeoutSeconds, kubeClient } = this.#options;
    const stop = new AbortController();
    let outcome: WatchEnd | undefined;
    const finish = (end: WatchEnd) => {
      outcome ??= end;
      stop.abort();
    };
    const watchdog = new Watchdog(3 * bookmarkIntervalMs, () => finish({ reason: "inactive" }));
    const onAbort = () => finish({ reason: "closed" });
    signal.addEventListener("abort", onAbort, { once: true });
    if (signal.aborted) onAbort();
    const onEvent = ({ type, object }: WatchEvent) => {
      watchdog.reset();
      if (type === "ERROR") {
        finish(object.code === 410 ? { reason: "gone" } : { reason: "error", error: new Error(`watch error ${object.code}: ${object.message}`) });
        return;
      }
      if (type === "ADDED" || type === "MODIFIED") this.#store({ ...object, apiVersion: this.kind.apiVersion, kind: this.kind.kind } as KubeObject);
      else if (type === "DELETED") this.#remove(object as KubeObject);
      const version = object.metadata?.resourceVersion;
      if (typeof version === "string" && version !== "") this.#resourceVersion = version;
    };
    const query = {
      labelSelector: this.#selector,
      resourceVersion: this.#resourceVersion,
      allowWatchBookmarks: true,
      timeoutSeconds: watchTimeoutSeconds,
    };
    try {
      await kubeClient.watch(this.kind.path, query, onEvent, stop.signal);
      return outcome ?? { reason: "closed" };
    } catch (error) {
      return outcome ?? (statusCodeOf(error) === 410 ? { reason: "gone" } : { reason: "error", error });
    } finally {
      watchdog.stop();
      signal.removeEventListener("abort", onAbort);
    }
  }

  /** Caches the reduced `object` with the digest it holds and reports the change; returns its location. */
  #store(object: KubeObject): string {
    const { namespace = "", name } = object.metadata;
    const cached = this.#cache.find(this.kind, namespace, name);
    if (!cached || cached.object.metadata.resourceVersion !== object.metadata.resourceVersion) {
      const key = resourceKeyOf(object);
      const held = this.#options.held?.(object, key, cached);
      this.#cache.set(this.kind, object, held);
      this.#options.onChange({ kind: this.kind, key, object, previous: cached?.object, held });
    }
    return `${namespace}/${name}`;
  }

  #remove(object: { metadata: { namespace?: string; name: string } }): void {
    const previous = this.#cache.delete(this.kind, object.metadata.namespace ?? "", object.metadata.name);
    if (previous) this.#options.onChange({ kind: this.kind, key: resourceKeyOf(previous), object: undefined, previous, held: undefined });
  }
}

/** The server's Status message with the request (a 403 names the missing verb), else the socket's error. */
function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
