// Notifications' storage (migrations/0016_notifiers.ts): notifiers with their signing secrets,
// the events written in the transaction of the transition that caused them, and their
// deliveries. Deciding when and how a delivery is sent is ctrl's
// (packages/ctrl/src/notifications/); this is storage and the compare-and-set that claims.
//
// Invariants:
//   * An event and its deliveries are written by `recordNotifications` in the caller's
//     transaction: a transition that rolls back leaves no event, one that commits leaves every
//     delivery it owes (to the notifiers that existed then).
//   * A delivery changes only by a compare-and-set on (id, generation): a claim moves it to
//     generation g+1 and pushes its next attempt past the claim's end, so no other replica
//     takes it meanwhile; the outcome is written on g+1 only. A claimer that died (kill -9)
//     leaves the delivery PENDING, due again when its claim ends: nothing is lost.
//   * The signing secret is returned by `create` and `rotateSecret` only; reads never carry it.
//   * A Slack notifier's URL (an incoming webhook: its path is the credential) is stored as the
//     secret is; reads carry it redacted (secretUrlShown), and an update that sends that form
//     back keeps the stored URL. The dispatcher's claim alone opens it.
import { randomBytes, randomUUID } from "node:crypto";
import { create, fromBinary, fromJsonString, toJsonString } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { parseLabelSelector } from "@flotilla/labels";
import {
  DeliverySchema,
  DeliveryState,
  NotificationEvent,
  NotifierFormat,
  NotifierSchema,
  type Delivery,
  type Notifier,
} from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { DeploymentSchema, RolloutState } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Kysely } from "kysely";
import { StoreError } from "./errors.ts";
import { decodePageToken, pageSize, toPage, type Page } from "./paging.ts";
import { isDuplicateKey } from "./regions.ts";
import type { Database, NotificationDeliveriesTable, NotifiersTable } from "./schema.ts";
import type { SecretKeyRing } from "./secrets.ts";
import { EVENT_TYPES, SUBSCRIBABLE_EVENTS } from "./notification-events.ts";

export { EVENT_TYPES, SUBSCRIBABLE_EVENTS };

/** A new signing secret in Standard Webhooks' form: whsec_ and 32 random bytes in base64. */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

/** What a transition owes notifiers: an event, about a deployment (selectors apply) or a region. */
export interface NotificationInput {
  event: NotificationEvent;
  /** The deployment's id, or the region's name (agent.lost). */
  subject: string;
  /** The deployment it is about, when it is about one: the notifiers' selectors look at it. */
  deploymentId?: string;
  data: Record<string, unknown>;
}

/** A notifier's selector, compiled. */
function selects(notifier: Notifier): (deployment: { namespace: string; podLabels: Record<string, string> } | undefined) => boolean {
  const namespaces = notifier.selector?.namespaces ?? [];
  const globs = namespaces.map((glob) => {
    const escaped = glob.split("*").map((part) => part.replace(/[.+?^${}()|[\]\\-]/g, "\\$&"));
    return new RegExp(`^${escaped.join(".*")}$`);
  });
  const labels = notifier.selector?.labels ? parseLabelSelector(notifier.selector.labels) : undefined;
  return (deployment) => {
    if (!deployment) return true;
    if (globs.length > 0 && !globs.some((g) => g.test(deployment.namespace))) return false;
    return labels ? labels(deployment.podLabels) : true;
  };
}

/**
 * Writes the events and one PENDING delivery per notifier that subscribes to each, in `tx` (the
 * transaction of the transition that caused them). Returns how many deliveries it wrote.
 */
export async function recordNotifications(tx: Kysely<Database>, inputs: readonly NotificationInput[], now: number): Promise<number> {
  if (inputs.length === 0) return 0;
  const notifiers = (await tx.selectFrom("notifiers").select(["name", "spec"]).execute()).map((row) => {
    const notifier = fromJsonString(NotifierSchema, row.spec, { ignoreUnknownFields: true });
    notifier.name = row.name;
    return { notifier, selects: selects(notifier) };
  });
  if (notifiers.length === 0) return 0;
  const ids = [...new Set(inputs.flatMap((i) => (i.deploymentId ? [i.deploymentId] : [])))];
  const deployments = new Map<string, { namespace: string; podLabels: Record<string, string>; project: string }>();
  if (ids.length > 0) {
    for (const row of await tx.selectFrom("deployments").select(["id", "body", "project"]).where("id", "in", ids).execute()) {
      const d = fromBinary(DeploymentSchema, row.body);
      deployments.set(row.id, { namespace: d.namespace, podLabels: d.podLabels, project: row.project });
    }
  }
  const events: Database["notification_events"][] = [];
  const deliveries: Omit<NotificationDeliveriesTable, "id">[] = [];
  for (const input of inputs) {
    const deployment = input.deploymentId ? deployments.get(input.deploymentId) : undefined;
    const to = notifiers.filter(
      ({ notifier, selects }) =>
        (notifier.events.length === 0 || notifier.events.includes(input.event)) && (input.event === NotificationEvent.AGENT_LOST || selects(deployment)),
    );
    if (to.length === 0) continue;
    const id = `msg_${randomUUID().replaceAll("-", "")}`;
    const data = deployment ? { namespace: deployment.namespace, project: deployment.project, ...input.data } : input.data;
    events.push({ id, event: input.event, subject: input.subject.slice(0, 255), data: JSON.stringify(data), time: now });
    for (const { notifier } of to) deliveries.push(pendingDelivery(id, notifier.name, now));
  }
  if (events.length === 0) return 0;
  for (let i = 0; i < events.length; i += 200)
    await tx
      .insertInto("notification_events")
      .values(events.slice(i, i + 200))
      .execute();
  for (let i = 0; i < deliveries.length; i += 200)
    await tx
      .insertInto("notification_deliveries")
      .values(deliveries.slice(i, i + 200))
      .execute();
  return deliveries.length;
}

function pendingDelivery(eventId: string, notifier: string, now: number): Omit<NotificationDeliveriesTable, "id"> {
  return {
    event_id: eventId,
    notifier,
    state: DeliveryState.PENDING,
    generation: 1,
    attempts: 0,
    next_attempt_at: now,
    last_status: 0,
    last_error: "",
    create_time: now,
    update_time: now,
  };
}

/** A rollout's recorded transition, as recordNotifications needs it (rollouts.ts). */
export interface RolloutTransitionNotice {
  rollout: { id: string; deploymentId: string; fromRevision: number; toRevision: number; waves: readonly { name: string }[] };
  from: RolloutState;
  to: RolloutState;
  fromWave: number;
  toWave: number;
  action: string;
  actor: string;
  reason: string;
}

/** The events one recorded rollout transition owes (docs/guides/notifications.md lists them). */
export function rolloutNotifications(t: RolloutTransitionNotice): NotificationInput[] {
  const base = {
    rollout: t.rollout.id,
    deployment: t.rollout.deploymentId,
    fromRevision: t.rollout.fromRevision,
    toRevision: t.rollout.toRevision,
    state: RolloutState[t.to],
    wave: t.rollout.waves[t.toWave]?.name ?? "",
    reason: t.reason,
    actor: t.actor,
  };
  const out: NotificationInput[] = [];
  const add = (event: NotificationEvent, extra: Record<string, unknown> = {}) =>
    out.push({ event, subject: t.rollout.deploymentId, deploymentId: t.rollout.deploymentId, data: { ...base, ...extra } });
  if (t.from === RolloutState.UNSPECIFIED) add(NotificationEvent.ROLLOUT_STARTED);
  if (t.toWave > t.fromWave || t.action === "succeeded")
    add(NotificationEvent.ROLLOUT_WAVE_SUCCEEDED, { wave: t.rollout.waves[t.fromWave]?.name ?? "", waveIndex: t.fromWave });
  if (t.from !== t.to) {
    if (t.to === RolloutState.WAITING_APPROVAL) add(NotificationEvent.ROLLOUT_WAITING_APPROVAL);
    if (t.to === RolloutState.PAUSED) add(NotificationEvent.ROLLOUT_PAUSED);
    // A rollout that fails with onFailure ROLLBACK goes straight to ROLLED_BACK: it failed too.
    if (t.to === RolloutState.FAILED || t.to === RolloutState.ROLLED_BACK) add(NotificationEvent.ROLLOUT_FAILED);
    if (t.to === RolloutState.ROLLED_BACK) add(NotificationEvent.ROLLOUT_ROLLED_BACK);
    if (t.to === RolloutState.SUCCEEDED) add(NotificationEvent.ROLLOUT_SUCCEEDED);
  }
  return out;
}

/** A delivery as the dispatcher sends it: its event and notifier joined in. */
export interface ClaimedDelivery {
  id: number;
  /** The generation the claim holds; the outcome is written on it. */
  generation: number;
  attempts: number;
  eventId: string;
  event: NotificationEvent;
  subject: string;
  data: string;
  eventTime: number;
  notifier: Notifier;
  /** The signing secret (whsec_…), opened: the dispatcher's alone, never logged. */
  secret: string;
}

export type DeliveryOutcome =
  | { kind: "delivered"; status: number }
  | { kind: "retry"; status: number; error: string; at: number }
  | { kind: "dead"; status: number; error: string };

export class NotificationRepository {
  readonly #db: Kysely<Database>;
  readonly #secrets: SecretKeyRing | undefined;

  constructor(db: Kysely<Database>, secrets: SecretKeyRing | undefined) {
    this.#db = db;
    this.#secrets = secrets;
  }

  /** The row's secret columns: both sealed (with a key file) or both bytes, under one flag. */
  #sealSecrets(name: string, secret: string | Uint8Array, url: string | undefined): Pick<NotifiersTable, "secret" | "secret_sealed" | "url_secret"> {
    const seal = (context: string, value: string | Uint8Array) =>
      this.#secrets ? this.#secrets.seal(context, value) : typeof value === "string" ? Buffer.from(value, "utf8") : value;
    return {
      secret: seal(notifierSecretContext(name), secret),
      secret_sealed: this.#secrets ? 1 : 0,
      url_secret: url === undefined ? null : seal(notifierUrlContext(name), url),
    };
  }

  #openUrl(row: Pick<NotifiersTable, "name" | "secret_sealed" | "url_secret">): string | undefined {
    if (!row.url_secret) return undefined;
    if (row.secret_sealed !== 1) return Buffer.from(row.url_secret).toString("utf8");
    if (!this.#secrets) throw new StoreError("failed_precondition", `notifier ${JSON.stringify(row.name)}: its URL is sealed and ctrl has no secrets key file`);
    return this.#secrets.open(notifierUrlContext(row.name), row.url_secret);
  }

  #openSecret(row: Pick<NotifiersTable, "name" | "secret" | "secret_sealed">): string {
    if (row.secret_sealed === 1) {
      if (!this.#secrets)
        throw new StoreError("failed_precondition", `notifier ${JSON.stringify(row.name)}: its secret is sealed and ctrl has no secrets key file`);
      return this.#secrets.open(notifierSecretContext(row.name), row.secret);
    }
    return Buffer.from(row.secret).toString("utf8");
  }

  /** Creates the notifier and its signing secret (returned here only); with `dryRun`, only checks that its name is free. */
  async create(notifier: Notifier, dryRun = false, now = Date.now()): Promise<{ notifier: Notifier; secret: string }> {
    if (dryRun) {
      const taken = await this.#db.selectFrom("notifiers").select("name").where("name", "=", notifier.name).executeTakeFirst();
      if (taken) throw alreadyExists(notifier.name);
      return { notifier, secret: "" };
    }
    const secret = newSigningSecret();
    try {
      await this.#db
        .insertInto("notifiers")
        .values({
          name: notifier.name,
          spec: specJson(shownForm(notifier)),
          ...this.#sealSecrets(notifier.name, secret, secretUrl(notifier)),
          secret_time: now,
          create_time: now,
          update_time: now,
        })
        .execute();
    } catch (error) {
      if (isDuplicateKey(error)) throw alreadyExists(notifier.name);
      throw error;
    }
    return { notifier: await this.get(notifier.name), secret };
  }

  async get(name: string): Promise<Notifier> {
    const row = await this.#db
      .selectFrom("notifiers")
      .select(["name", "spec", "secret_time", "create_time", "update_time"])
      .where("name", "=", name)
      .executeTakeFirst();
    if (!row) throw new StoreError("not_found", `notifier ${JSON.stringify(name)} not found`, "name");
    return toNotifier(row);
  }

  async list(requestedPageSize: number, pageToken: string): Promise<Page<Notifier>> {
    const size = pageSize(requestedPageSize);
    const after = decodePageToken(pageToken);
    let query = this.#db
      .selectFrom("notifiers")
      .select(["name", "spec", "secret_time", "create_time", "update_time"])
      .orderBy("name")
      .limit(size + 1);
    if (after !== undefined) query = query.where("name", ">", after);
    return toPage(await query.execute(), size, (r) => r.name, toNotifier);
  }

  /**
   * Replaces its fields (the secret stays; a Slack URL sent back as reads show it stays too);
   * NOT_FOUND for an unknown one.
   */
  async update(notifier: Notifier, dryRun = false, now = Date.now()): Promise<Notifier> {
    const row = await this.#db
      .selectFrom("notifiers")
      .select(["name", "spec", "secret", "secret_sealed", "url_secret"])
      .where("name", "=", notifier.name)
      .executeTakeFirst();
    if (!row) throw new StoreError("not_found", `notifier ${JSON.stringify(notifier.name)} not found`, "notifier.name");
    // Sent back as reads show it: the stored URL stays.
    const kept =
      row.url_secret !== null &&
      secretUrl(notifier) !== undefined &&
      notifier.url === toNotifier({ ...row, create_time: 0, update_time: 0, secret_time: 0 }).url;
    const url = kept ? this.#openUrl(row) : secretUrl(notifier);
    if (dryRun) return { ...(await this.get(notifier.name)), ...shownForm(notifier), createTime: undefined, updateTime: undefined, secretTime: undefined };
    const secrets = row.secret_sealed === 1 ? this.#secrets : undefined;
    const result = await this.#db
      .updateTable("notifiers")
      .set({
        spec: specJson(shownForm(notifier)),
        // Under the row's flag: sealed as `secret` is (or its bytes, as it is).
        url_secret: url === undefined ? null : secrets ? secrets.seal(notifierUrlContext(notifier.name), url) : Buffer.from(url, "utf8"),
        update_time: now,
      })
      .where("name", "=", notifier.name)
      .where("secret", "=", row.secret)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0)
      throw new StoreError("aborted", `notifier ${JSON.stringify(notifier.name)} changed meanwhile: try again`, "notifier.name");
    return this.get(notifier.name);
  }

  /** Deletes it and its deliveries not yet done (their events stay for the others). */
  async delete(name: string): Promise<void> {
    await this.#db.transaction().execute(async (tx) => {
      const result = await tx.deleteFrom("notifiers").where("name", "=", name).executeTakeFirst();
      if (Number(result.numDeletedRows) === 0) throw new StoreError("not_found", `notifier ${JSON.stringify(name)} not found`, "name");
      await tx.deleteFrom("notification_deliveries").where("notifier", "=", name).where("state", "=", DeliveryState.PENDING).execute();
    });
  }

  /** A new signing secret (returned here only). */
  async rotateSecret(name: string, now = Date.now()): Promise<{ notifier: Notifier; secret: string }> {
    const secret = newSigningSecret();
    const row = await this.#db.selectFrom("notifiers").select(["name", "secret", "secret_sealed", "url_secret"]).where("name", "=", name).executeTakeFirst();
    if (!row) throw new StoreError("not_found", `notifier ${JSON.stringify(name)} not found`, "name");
    const result = await this.#db
      .updateTable("notifiers")
      // The URL again too: both under the flag of now (a key file may have come since).
      .set({ ...this.#sealSecrets(name, secret, this.#openUrl(row)), secret_time: now, update_time: now })
      .where("name", "=", name)
      .where("secret", "=", row.secret)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) throw new StoreError("aborted", `notifier ${JSON.stringify(name)} changed meanwhile: try again`, "name");
    return { notifier: await this.get(name), secret };
  }

  /** Queues a notifier.test event for `name` alone; returns its delivery. */
  async test(name: string, now = Date.now()): Promise<Delivery> {
    const id = `msg_${randomUUID().replaceAll("-", "")}`;
    const deliveryId = await this.#db.transaction().execute(async (tx) => {
      const found = await tx.selectFrom("notifiers").select("name").where("name", "=", name).executeTakeFirst();
      if (!found) throw new StoreError("not_found", `notifier ${JSON.stringify(name)} not found`, "name");
      await tx
        .insertInto("notification_events")
        .values({ id, event: NotificationEvent.TEST, subject: name, data: JSON.stringify({ notifier: name, message: "a test from flotilla" }), time: now })
        .execute();
      const inserted = await tx
        .insertInto("notification_deliveries")
        .values(pendingDelivery(id, name, now))
        .executeTakeFirst();
      return Number(inserted.insertId ?? 0);
    });
    const page = await this.deliveries(deliveryId > 0 ? { id: deliveryId } : { eventId: id }, 1, "");
    return page.items[0]!;
  }

  /** Deliveries newest first, filtered. */
  async deliveries(
    filter: { notifier?: string; state?: DeliveryState; id?: number; eventId?: string },
    requestedPageSize: number,
    pageToken: string,
  ): Promise<Page<Delivery>> {
    const size = pageSize(requestedPageSize);
    const after = decodePageToken(pageToken);
    let query = this.#db
      .selectFrom("notification_deliveries as d")
      .innerJoin("notification_events as e", "e.id", "d.event_id")
      .select([
        "d.id",
        "d.notifier",
        "d.event_id",
        "e.event",
        "e.subject",
        "d.state",
        "d.attempts",
        "d.last_status",
        "d.last_error",
        "d.next_attempt_at",
        "d.create_time",
        "d.update_time",
      ])
      .orderBy("d.id", "desc")
      .limit(size + 1);
    if (filter.notifier) query = query.where("d.notifier", "=", filter.notifier);
    if (filter.state) query = query.where("d.state", "=", filter.state);
    if (filter.id !== undefined) query = query.where("d.id", "=", filter.id);
    if (filter.eventId !== undefined) query = query.where("d.event_id", "=", filter.eventId);
    if (after !== undefined) {
      const id = Number(after);
      if (!Number.isSafeInteger(id)) throw new StoreError("invalid_argument", "page_token: not a token from a previous page", "page_token");
      query = query.where("d.id", "<", id);
    }
    return toPage(
      await query.execute(),
      size,
      (r) => String(r.id),
      (r) =>
        create(DeliverySchema, {
          id: BigInt(r.id),
          notifier: r.notifier,
          eventId: r.event_id,
          event: r.event,
          subject: r.subject,
          state: r.state,
          attempts: r.attempts,
          lastStatusCode: r.last_status,
          lastError: r.last_error,
          nextAttemptTime: r.state === DeliveryState.PENDING ? timestampFromMs(Number(r.next_attempt_at)) : undefined,
          createTime: timestampFromMs(Number(r.create_time)),
          updateTime: timestampFromMs(Number(r.update_time)),
        }),
    );
  }

  /**
   * Claims up to `limit` due deliveries, at most `perNotifier` of each notifier (minus those it
   * already has in flight, `busy`), skipping notifiers in `busy` at their limit. Each is a
   * compare-and-set: the claim holds until `now + claimMs`; one another replica took first is
   * left out.
   */
  async claim(limit: number, perNotifier: number, busy: ReadonlyMap<string, number>, claimMs: number, now = Date.now()): Promise<ClaimedDelivery[]> {
    if (limit <= 0) return [];
    // Anything due at all (one index probe): at rest, the only query.
    const due = await this.#db
      .selectFrom("notification_deliveries")
      .select("id")
      .where("state", "=", DeliveryState.PENDING)
      .where("next_attempt_at", "<=", now)
      .limit(1)
      .execute();
    if (due.length === 0) return [];
    // Then each notifier's oldest due deliveries, as many as it has room for: a query over every
    // notifier at once read past a dead receiver's backlog (its oldest rows, never delivered) each
    // time, and those rows filled the candidates, starving the live notifiers (B15).
    const open = (await this.#db.selectFrom("notifiers").select("name").execute())
      .map((r) => ({ name: r.name, room: perNotifier - (busy.get(r.name) ?? 0) }))
      .filter((n) => n.room > 0);
    const candidates = (
      await Promise.all(
        open.map(({ name, room }) =>
          this.#db
            .selectFrom("notification_deliveries")
            .select(["id", "generation", "notifier", "event_id", "attempts", "next_attempt_at"])
            .where("notifier", "=", name)
            .where("state", "=", DeliveryState.PENDING)
            .where("next_attempt_at", "<=", now)
            .orderBy("next_attempt_at")
            .orderBy("id")
            .limit(Math.min(room, limit))
            .execute(),
        ),
      )
    ).flat();
    // The oldest first, across notifiers.
    candidates.sort((a, b) => Number(a.next_attempt_at) - Number(b.next_attempt_at) || a.id - b.id);
    const chosen = candidates.slice(0, limit);
    const claimed: typeof candidates = [];
    for (const c of chosen) {
      const result = await this.#db
        .updateTable("notification_deliveries")
        .set({ generation: Number(c.generation) + 1, next_attempt_at: now + claimMs, update_time: now })
        .where("id", "=", c.id)
        .where("generation", "=", c.generation)
        .where("state", "=", DeliveryState.PENDING)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 1) claimed.push({ ...c, generation: Number(c.generation) + 1 });
    }
    if (claimed.length === 0) return [];
    const events = await this.#db
      .selectFrom("notification_events")
      .selectAll()
      .where(
        "id",
        "in",
        claimed.map((c) => c.event_id),
      )
      .execute();
    const notifiers = await this.#db
      .selectFrom("notifiers")
      .selectAll()
      .where("name", "in", [...new Set(claimed.map((c) => c.notifier))])
      .execute();
    const eventById = new Map(events.map((e) => [e.id, e]));
    const notifierByName = new Map(notifiers.map((n) => [n.name, n]));
    const out: ClaimedDelivery[] = [];
    for (const c of claimed) {
      const event = eventById.get(c.event_id);
      const notifier = notifierByName.get(c.notifier);
      if (!event || !notifier) {
        // Its notifier was deleted meanwhile: nothing to send it to.
        await this.complete(c.id, c.generation, { kind: "dead", status: 0, error: "notifier or event deleted" }, now);
        continue;
      }
      out.push({
        id: c.id,
        generation: c.generation,
        attempts: c.attempts,
        eventId: event.id,
        event: event.event,
        subject: event.subject,
        data: event.data,
        eventTime: Number(event.time),
        notifier: { ...toNotifier(notifier), url: this.#openUrl(notifier) ?? toNotifier(notifier).url },
        secret: this.#openSecret(notifier),
      });
    }
    return out;
  }

  /** Writes an attempt's outcome on the claim's generation; false when the claim was lost (nothing written). */
  async complete(id: number, generation: number, outcome: DeliveryOutcome, now = Date.now()): Promise<boolean> {
    const state = outcome.kind === "delivered" ? DeliveryState.DELIVERED : outcome.kind === "dead" ? DeliveryState.DEAD : DeliveryState.PENDING;
    const result = await this.#db
      .updateTable("notification_deliveries")
      .set((eb) => ({
        state,
        generation: generation + 1,
        attempts: eb("attempts", "+", 1),
        last_status: outcome.status,
        last_error: outcome.kind === "delivered" ? "" : outcome.error.slice(0, 1024),
        next_attempt_at: outcome.kind === "retry" ? outcome.at : now,
        update_time: now,
      }))
      .where("id", "=", id)
      .where("generation", "=", generation)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** The earliest next attempt of a pending delivery; undefined: none pending. */
  async nextDue(): Promise<number | undefined> {
    const row = await this.#db
      .selectFrom("notification_deliveries")
      .select((eb) => eb.fn.min("next_attempt_at").as("due"))
      .where("state", "=", DeliveryState.PENDING)
      .executeTakeFirst();
    return row?.due === null || row?.due === undefined ? undefined : Number(row.due);
  }

  /**
   * Writes one agent.lost event for each region whose agent has been silent since before
   * `silentBefore` and has no event for this silence yet: a compare-and-set on the agent's row
   * (lost_seen := last_seen), so one replica writes it however many look.
   */
  async recordLostAgents(silentBefore: number, now = Date.now()): Promise<number> {
    const silent = await this.#db
      .selectFrom("agents")
      .innerJoin("regions", "regions.id", "agents.region_id")
      .select(["agents.region_id", "agents.last_seen", "agents.lost_seen", "regions.name"])
      .where("agents.last_seen", "<", silentBefore)
      .execute();
    let written = 0;
    for (const agent of silent) {
      if (agent.lost_seen !== null && agent.lost_seen !== undefined && Number(agent.lost_seen) === Number(agent.last_seen)) continue;
      await this.#db.transaction().execute(async (tx) => {
        const result = await tx
          .updateTable("agents")
          .set({ lost_seen: agent.last_seen })
          .where("region_id", "=", agent.region_id)
          .where("last_seen", "=", agent.last_seen)
          .where((eb) => eb.or([eb("lost_seen", "is", null), eb("lost_seen", "<>", agent.last_seen)]))
          .executeTakeFirst();
        if (Number(result.numUpdatedRows) !== 1) return;
        written++;
        await recordNotifications(
          tx,
          [
            {
              event: NotificationEvent.AGENT_LOST,
              subject: agent.name,
              data: { region: agent.name, lastSeen: new Date(Number(agent.last_seen)).toISOString() },
            },
          ],
          now,
        );
      });
    }
    return written;
  }

  /** Deletes events older than `maxAgeMs` whose deliveries are all done, and those deliveries. */
  async prune(maxAgeMs: number, now = Date.now()): Promise<void> {
    const before = now - maxAgeMs;
    for (;;) {
      const old = await this.#db.selectFrom("notification_events").select("id").where("time", "<", before).limit(500).execute();
      if (old.length === 0) return;
      const ids = old.map((e) => e.id);
      const pending = await this.#db
        .selectFrom("notification_deliveries")
        .select("event_id")
        .where("event_id", "in", ids)
        .where("state", "=", DeliveryState.PENDING)
        .execute();
      const keep = new Set(pending.map((p) => p.event_id));
      const done = ids.filter((id) => !keep.has(id));
      if (done.length === 0) return;
      await this.#db.deleteFrom("notification_deliveries").where("event_id", "in", done).execute();
      await this.#db.deleteFrom("notification_events").where("id", "in", done).execute();
      if (old.length < 500) return;
    }
  }
}

/** What a notifier's signing secret is sealed for (its name: a secret copied to another row does not open). */
export function notifierSecretContext(name: string): string {
  return `notifier/${name}/signing-secret`;
}

/** What a Slack notifier's URL is sealed for. */
export function notifierUrlContext(name: string): string {
  return `notifier/${name}/url`;
}

/**
 * The URL to keep as a secret: a Slack notifier's (an incoming webhook's path is its
 * credential). A standard-webhooks receiver authenticates by the signature: its URL is plain.
 */
function secretUrl(notifier: Notifier): string | undefined {
  return notifier.format === NotifierFormat.SLACK ? notifier.url : undefined;
}

/** `notifier` as reads show it: a Slack URL cut after its first path segment (secretUrlShown). */
function shownForm(notifier: Notifier): Notifier {
  return secretUrl(notifier) === undefined ? notifier : { ...notifier, url: secretUrlShown(notifier.url) };
}

/** "https://hooks.slack.com/services/…": the origin and the first path segment of `url`. */
export function secretUrlShown(url: string): string {
  const parsed = new URL(url);
  const first = parsed.pathname.split("/").find((segment) => segment !== "");
  return `${parsed.origin}/${first ? `${first}/` : ""}…`;
}

function alreadyExists(name: string): StoreError {
  return new StoreError("already_exists", `notifier ${JSON.stringify(name)} already exists`, "notifier.name");
}

function specJson(notifier: Notifier): string {
  const spec = create(NotifierSchema, { ...notifier, name: "", createTime: undefined, updateTime: undefined, secretTime: undefined });
  return toJsonString(NotifierSchema, spec);
}

function toNotifier(row: Pick<NotifiersTable, "name" | "spec" | "secret_time" | "create_time" | "update_time">): Notifier {
  const notifier = fromJsonString(NotifierSchema, row.spec, { ignoreUnknownFields: true });
  notifier.name = row.name;
  notifier.createTime = timestampFromMs(Number(row.create_time));
  notifier.updateTime = timestampFromMs(Number(row.update_time));
  notifier.secretTime = timestampFromMs(Number(row.secret_time));
  return notifier;
}
