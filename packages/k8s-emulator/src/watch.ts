// WATCH streams: newline-delimited JSON events over a chunked HTTP response,
// with the semantics of the real server's watch cache: resume from a
// resourceVersion out of the bounded history (410 Expired when too old),
// synthetic ADDED events when starting without one, selector transitions
// turned into ADDED/DELETED, optional BOOKMARKs and server-side timeouts. A watch
// asking for a Table gets each event's object as a one-row Table (handlers/watch.go
// watchEmbeddedEncoder), the column definitions only in the first.
import type { ServerResponse } from "node:http";
import type { KindStrategy } from "./kinds/strategy.ts";
import type { Selector } from "./selectors.ts";
import type { ObjectStore, StoreEvent } from "./store.ts";
import type { KubeObject } from "./util.ts";
import { groupVersion } from "./resources.ts";
import { toTable, type TableOptions } from "./table.ts";

export interface WatchRequest {
  rt: KindStrategy;
  namespace?: string;
  selector: Selector;
  /** undefined, '' or '0': start with the current state; otherwise resume after it. */
  resourceVersion?: number;
  allowBookmarks: boolean;
  timeoutSeconds?: number;
  /** Each event's object as a Table (Accept: application/json;as=Table;...). */
  table?: TableOptions;
}

type WireEventType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";

class WatchStream {
  private readonly hub: WatchHub;
  private readonly req: WatchRequest;
  private readonly res: ServerResponse;
  private readonly timers: NodeJS.Timeout[] = [];
  private unsubscribe: (() => void) | undefined;
  private closed = false;
  /** A Table has been sent (with the column definitions). */
  private tableStarted = false;

  constructor(hub: WatchHub, req: WatchRequest, res: ServerResponse) {
    this.hub = hub;
    this.req = req;
    this.res = res;
  }

  start(store: ObjectStore, bookmarkIntervalMs: number): void {
    this.res.writeHead(200, { "Content-Type": "application/json", "Cache-Control": "no-cache, private" });
    this.res.flushHeaders();
    this.res.on("close", () => this.close());
    const { resourceVersion } = this.req;
    if (resourceVersion === undefined || resourceVersion === 0) {
      for (const obj of store.list(this.req.rt, this.req.namespace)) {
        if (this.req.selector(obj)) this.send("ADDED", obj);
      }
    } else {
      const backlog = store.eventsSince(this.req.rt, resourceVersion);
      if (backlog === "expired") {
        this.send(
          "ERROR",
          {
            kind: "Status",
            apiVersion: "v1",
            metadata: {},
            status: "Failure",
            message: `too old resource version: ${resourceVersion} (${store.resourceVersion})`,
            reason: "Expired",
            code: 410,
          },
          true,
        );
        this.end();
        return;
      }
      for (const e of backlog) this.onEvent(e);
    }
    // Subscribing in the same tick as reading the state leaves no gap: store
    // events are delivered synchronously.
    this.unsubscribe = store.subscribe((e) => this.onEvent(e));
    if (this.req.allowBookmarks && bookmarkIntervalMs > 0) {
      this.timers.push(
        setInterval(() => {
          this.send("BOOKMARK", {
            kind: this.req.rt.kind,
            apiVersion: groupVersion(this.req.rt),
            metadata: { resourceVersion: String(store.resourceVersion) },
          });
        }, bookmarkIntervalMs),
      );
    }
    if (this.req.timeoutSeconds !== undefined && this.req.timeoutSeconds > 0) {
      this.timers.push(setTimeout(() => this.end(), this.req.timeoutSeconds * 1000));
    }
  }

  private onEvent(e: StoreEvent): void {
    if (e.rt !== this.req.rt) return;
    if (this.req.namespace !== undefined && e.object.metadata.namespace !== this.req.namespace) return;
    const now = e.type !== "DELETED" && this.req.selector(e.object);
    const before = e.previous !== undefined && this.req.selector(e.previous);
    if (e.type === "ADDED" && now) this.send("ADDED", e.object);
    else if (e.type === "MODIFIED" && now) this.send(before ? "MODIFIED" : "ADDED", e.object);
    else if (e.type === "MODIFIED" && before) {
      // The object left the selection: the watch cache reports the previous
      // state as DELETED, stamped with the event's resourceVersion.
      this.send("DELETED", { ...e.previous!, metadata: { ...e.previous!.metadata, resourceVersion: String(e.rv) } });
    } else if (e.type === "DELETED" && before) this.send("DELETED", e.object);
  }

  private send(type: WireEventType, object: KubeObject, force = false): void {
    if (this.closed || (this.hub.suppressed && !force)) return;
    this.res.write(`${JSON.stringify({ type, object: this.encode(object) })}\n`);
  }

  /** The event's object, or its Table; a Status (an ERROR's) is sent as it is, as doTransformObject does. */
  private encode(object: KubeObject): unknown {
    const { table } = this.req;
    if (!table || object.kind === "Status") return object;
    const encoded = toTable(this.req.rt.printer, [object], { resourceVersion: object.metadata.resourceVersion }, { ...table, noHeaders: this.tableStarted });
    // Column definitions only once: watchEmbeddedEncoder sets NoHeaders after its first event.
    this.tableStarted = true;
    return encoded;
  }

  /** Ends the response cleanly, as the server does when a watch times out. */
  end(): void {
    if (!this.res.writableEnded) this.res.end();
    this.close();
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe?.();
    for (const t of this.timers) clearTimeout(t);
    this.hub.forget(this);
  }
}

export class WatchHub {
  /** When set, watches stay open but deliver nothing (not even bookmarks). */
  suppressed = false;
  private readonly store: ObjectStore;
  private readonly active = new Set<WatchStream>();
  private bookmarkIntervalMs: number;
  private dropTimer: NodeJS.Timeout | undefined;

  constructor(store: ObjectStore, bookmarkIntervalMs: number) {
    this.store = store;
    this.bookmarkIntervalMs = bookmarkIntervalMs;
  }

  get openCount(): number {
    return this.active.size;
  }

  open(req: WatchRequest, res: ServerResponse): void {
    const stream = new WatchStream(this, req, res);
    this.active.add(stream);
    stream.start(this.store, this.bookmarkIntervalMs);
  }

  forget(stream: WatchStream): void {
    this.active.delete(stream);
  }

  /** Ends every open watch now. */
  dropAll(): number {
    const streams = [...this.active];
    for (const s of streams) s.end();
    return streams.length;
  }

  /** Ends every open watch each `ms` milliseconds (0 disables). */
  setDropInterval(ms: number): void {
    clearInterval(this.dropTimer);
    this.dropTimer = ms > 0 ? setInterval(() => this.dropAll(), ms) : undefined;
    this.dropTimer?.unref();
  }

  stop(): void {
    this.setDropInterval(0);
    this.dropAll();
  }
}
