// StatusService.WatchStatus: the current status of the selected objects and of every
// region, a SYNCED marker, then each change as it happens (streaming/status-feed.ts). An
// object's whole status is re-read and sent whenever an event names it, so events that
// pile up while the client reads slowly are coalesced into one send per object. The streams
// a feed batch wakes share one read of the batch's statuses, and the streams' region checks
// share one timer and one read (status/joined-read.ts): queries per batch do not grow with
// the number of open streams. A caller without a fleet-wide role is sent only its projects'
// objects: the snapshot lists only those, and a change is sent only of an object of its
// projects; a deletion, whose project is gone with the object, by the project the audit trail
// recorded it in (a stream resumed from a cursor has not sent the object before).
import { create, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import type { Region } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { ObjectStatusSchema, type ObjectStatus, type WatchStatusRequest, type WatchStatusResponseSchema } from "@flotilla/proto/ctrl/v1/status_pb.js";
import type { ResourceRepository, Store, StoredRollout } from "@flotilla/store";
import { projectAccess } from "../../auth.ts";
import { invalidArgument } from "../../errors.ts";
import { authorizeResource } from "../resource-crud.ts";
import { rolloutMessages } from "../rollout-service.ts";
import { JoinedRead } from "../../status/joined-read.ts";
import { statusesOf, withAgentStatus, type StatusOptions } from "../../status/region-status.ts";
import type { StatusFeed } from "../../streaming/status-feed.ts";
import * as validate from "../../validate.ts";

type Response = MessageInitShape<typeof WatchStatusResponseSchema>;

export interface WatchStatusOptions {
  /** How often regions' agent liveness is compared with what the stream last sent. */
  regionIntervalMs: number;
}

export const DEFAULT_WATCH_STATUS_OPTIONS: WatchStatusOptions = { regionIntervalMs: 1000 };

/** Objects read per query. */
const PAGE = 1000;

/** An object's status, and its project (undefined: it is deleted). */
interface Shown {
  status: ObjectStatus;
  project: string | undefined;
}

/** Like authorizeResource, but an id that names nothing is watched as deleted (it may be created later). */
async function authorizeResourceIfStored(repository: ResourceRepository<DescMessage>, ctx: HandlerContext, id: string): Promise<void> {
  if ((await repository.projectsOf([id])).has(id)) await authorizeResource(repository, ctx, id);
}

export function watchStatus(store: Store, feed: StatusFeed, statusOptions: StatusOptions, options: WatchStatusOptions) {
  const repositories = (type: ResourceType): ResourceRepository<DescMessage>[] => {
    if (type === ResourceType.UNSPECIFIED) return [store.deployments, store.sentinels, store.networkPolicies] as ResourceRepository<DescMessage>[];
    const repository = store.repository(type);
    if (!repository) throw invalidArgument("resource_type", `unknown type ${type}`);
    return [repository];
  };
  /** The current status of `ids` of one type (deleted ones included, as such), each with its project (undefined: deleted). */
  const objectStatuses = async (repository: ResourceRepository<DescMessage>, ids: string[]): Promise<Shown[]> => {
    const type = repository.kind.type;
    const [objects, statuses, rollouts] = await Promise.all([
      repository.getMany(ids),
      statusesOf(store, type, ids, statusOptions),
      type === ResourceType.DEPLOYMENT ? store.rollouts.newestOf(ids) : new Map<string, StoredRollout>(),
    ]);
    const shownRollouts = new Map((await rolloutMessages(store, [...rollouts.values()], statusOptions, statuses)).map((r) => [r.deployment, r]));
    return ids.map((id) => {
      const object = objects.get(id) as { revision: bigint; project: string } | undefined;
      const status = create(ObjectStatusSchema, {
        resourceType: type,
        id,
        revision: object?.revision ?? 0n,
        deleted: !object,
        regions: object ? statuses.get(id) : [],
        rollout: object ? shownRollouts.get(id) : undefined,
      });
      return { status, project: object?.project };
    });
  };

  const objectKey = (type: number, id: string) => `${type}/${id}`;
  const liveObjects = new JoinedRead<string, Shown>(async (keys) => {
    const found = new Map<string, Shown>();
    const idsByType = new Map<number, string[]>();
    for (const key of keys) {
      const slash = key.indexOf("/");
      const type = Number(key.slice(0, slash));
      const ids = idsByType.get(type) ?? [];
      ids.push(key.slice(slash + 1));
      idsByType.set(type, ids);
    }
    for (const [type, ids] of idsByType) {
      const repository = store.repository(type)!;
      for (let i = 0; i < ids.length; i += PAGE) {
        for (const object of await objectStatuses(repository, ids.slice(i, i + PAGE))) found.set(objectKey(type, object.status.id), object);
      }
    }
    return found;
  });
  const allRegions = new JoinedRead<null, Region[]>(async () => {
    const regions: Region[] = [];
    for (let token = "", first = true; first || token !== ""; first = false) {
      const page = await store.regions.list(PAGE, token);
      regions.push(...(await withAgentStatus(store, page.items, statusOptions)));
      token = page.nextPageToken;
    }
    return new Map([[null, regions]]);
  });
  // One timer for every stream's region check, so that their reads join.
  const regionCheckers = new Set<() => void>();
  let regionTimer: NodeJS.Timeout | undefined;
  const checkRegions = (wake: () => void): (() => void) => {
    regionCheckers.add(wake);
    regionTimer ??= setInterval(() => {
      for (const check of regionCheckers) check();
    }, options.regionIntervalMs);
    return () => {
      regionCheckers.delete(wake);
      if (regionCheckers.size === 0) {
        clearInterval(regionTimer);
        regionTimer = undefined;
      }
    };
  };

  return async function* (req: WatchStatusRequest, ctx: HandlerContext): AsyncIterable<Response> {
    const selected = repositories(req.resourceType);
    if (req.id !== "") {
      if (req.resourceType === ResourceType.UNSPECIFIED) throw invalidArgument("resource_type", "is required with id");
      validate.id(req.id);
    }
    const resumeAfter = req.afterCursor;
    if (resumeAfter !== undefined && resumeAfter < 0n) throw invalidArgument("after_cursor", "must not be negative");
    const wanted = (type: number, id: string) => selected.some((r) => r.kind.type === type) && (req.id === "" || req.id === id);
    if (req.id !== "") await authorizeResourceIfStored(selected[0]!, ctx, req.id);
    const visible = projectAccess(ctx).visibleProjects();
    /** Keys of the objects this stream sent (kept only when it is restricted to some projects). */
    const sent = new Set<string>();
    /** The projects deleted objects of `keys` were in, for a restricted stream, when it did not send them itself. */
    const projectsAtDeletion = async (keys: string[], objects: ReadonlyMap<string, Shown>): Promise<void> => {
      if (!visible) return;
      const unknown = keys.filter((key) => objects.get(key)!.project === undefined && !sent.has(key));
      for (const repository of selected) {
        const ids = unknown.filter((key) => key.startsWith(`${repository.kind.type}/`)).map((key) => key.slice(key.indexOf("/") + 1));
        const projects = await store.audit.projectsAtDeletion(repository.kind.field, `Delete${repository.kind.action}`, ids);
        for (const [id, project] of projects) if (visible.has(project)) sent.add(objectKey(repository.kind.type, id));
      }
    };
    const mayShow = (key: string, object: Shown): boolean => {
      if (!visible) return true;
      const show = object.project === undefined ? sent.has(key) : visible.has(object.project);
      if (show && object.project !== undefined) sent.add(key);
      else sent.delete(key);
      return show;
    };

    // Joined before anything is read: what changes while the snapshot is read is sent after it.
    const pending = new Set<string>();
    let pendingCursor = 0;
    let wake: (() => void) | undefined;
    const unsubscribe = feed.subscribe((events, cursor) => {
      for (const e of events) if (wanted(e.type, e.id)) pending.add(objectKey(e.type, e.id));
      pendingCursor = cursor;
      wake?.();
    });
    const stopCheckingRegions = checkRegions(() => wake?.());
    const stopFollowing = () => {
      unsubscribe();
      stopCheckingRegions();
      ctx.signal.removeEventListener("abort", onAbort);
    };
    // Also on abort: a client that leaves while this generator waits at a yield may leave it
    // there for good (the response write it waits behind never ends), and the subscriptions
    // must not outlive the call.
    const onAbort = () => {
      stopFollowing();
      wake?.();
    };
    ctx.signal.addEventListener("abort", onAbort, { once: true });
    const sentRegions = new Map<string, string>();
    /** Regions whose agent status differs from what this stream last sent. */
    const changedRegions = async (): Promise<Region[]> => {
      const changed: Region[] = [];
      for (const region of (await allRegions.get([null])).get(null)!) {
        const a = region.agent;
        const fingerprint = `${region.headVersion}/${a?.connected}/${a?.appliedVersion}/${a?.lastSeen?.seconds}/${a?.leaderIdentity}`;
        if (sentRegions.get(region.name) !== fingerprint) changed.push(region);
        sentRegions.set(region.name, fingerprint);
      }
      return changed;
    };
    try {
      let cursor = BigInt(feed.cursor());
      if (resumeAfter === undefined) {
        for (const repository of selected) {
          const ids = req.id !== "" ? [req.id] : undefined;
          if (ids) {
            for (const object of await objectStatuses(repository, ids)) {
              if (mayShow(objectKey(repository.kind.type, object.status.id), object)) yield { event: { case: "object", value: object.status }, cursor };
            }
            continue;
          }
          for (let token = "", first = true; first || token !== ""; first = false) {
            const page = await repository.list(PAGE, token, visible);
            const pageIds = page.items.map((o) => (o as unknown as { id: string }).id);
            for (const object of await objectStatuses(repository, pageIds)) {
              if (mayShow(objectKey(repository.kind.type, object.status.id), object)) yield { event: { case: "object", value: object.status }, cursor };
            }
            token = page.nextPageToken;
          }
        }
      } else {
        const { prunedThrough } = await store.statusEvents.bounds();
        if (resumeAfter < BigInt(prunedThrough)) {
          throw new ConnectError(`status changes after cursor ${resumeAfter} are no longer kept; watch again without a cursor`, Code.OutOfRange);
        }
        // Every change after the client's cursor, to the newest: the feed's cursor may be held
        // back by a gap, and the feed hands this stream only what it reads after the subscription.
        for (let after = Number(resumeAfter); ; ) {
          const events = await store.statusEvents.read(after, PAGE);
          for (const e of events) if (wanted(e.type, e.id)) pending.add(objectKey(e.type, e.id));
          if (events.length < PAGE) break;
          after = events[events.length - 1]!.seq;
        }
        pendingCursor = Math.max(pendingCursor, Number(cursor));
      }
      for (const region of await changedRegions()) yield { event: { case: "region", value: region }, cursor };
      if (resumeAfter === undefined) yield { event: { case: "synced", value: {} }, cursor };

      while (!ctx.signal.aborted) {
        if (pending.size > 0) {
          const batch = [...pending];
          pending.clear();
          cursor = BigInt(Math.max(Number(cursor), pendingCursor));
          for (let i = 0; i < batch.length; i += PAGE) {
            const keys = batch.slice(i, i + PAGE);
            const statuses = await liveObjects.get(keys);
            await projectsAtDeletion(keys, statuses);
            for (const key of keys) {
              const object = statuses.get(key)!;
              if (mayShow(key, object)) yield { event: { case: "object", value: object.status }, cursor };
            }
          }
        }
        for (const region of await changedRegions()) yield { event: { case: "region", value: region }, cursor };
        if (pending.size > 0) continue;
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
    } finally {
      stopFollowing();
    }
  };
}
