// A TCP proxy a test can cut and restore: "the database is down" without touching the
// database other tests share. It can also hold what clients send (a request in flight that
// arrives late, as from a process paused mid-call) and release it.
import net from "node:net";
import { Store } from "@flotilla/store";
import type { TestDatabase } from "./databases.ts";
import { storeDecisions } from "@flotilla/ctrl/rollouts";

export interface TcpProxy {
  port: number;
  /** Drops every connection and refuses new ones. */
  cut(): void;
  restore(): void;
  /** Keeps what clients send from now on (answers still flow back) until release(). */
  hold(): void;
  /** Forwards what was held, in order, and everything after it. */
  release(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  let down = false;
  let holding = false;
  const sockets = new Set<net.Socket>();
  const links = new Set<{ client: net.Socket; upstream: net.Socket; held: Buffer[] }>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
    s.on("error", () => s.destroy());
  };
  const server = net.createServer((client) => {
    track(client);
    if (down) return client.destroy();
    const upstream = net.connect(targetPort, targetHost);
    track(upstream);
    const link = { client, upstream, held: [] as Buffer[] };
    links.add(link);
    client.on("data", (chunk: Buffer) => (holding ? link.held.push(chunk) : upstream.write(chunk)));
    upstream.pipe(client);
    client.once("close", () => {
      upstream.destroy();
      links.delete(link);
    });
    upstream.once("close", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut() {
      down = true;
      for (const s of sockets) s.destroy();
    },
    restore() {
      down = false;
    },
    hold() {
      holding = true;
    },
    release() {
      holding = false;
      for (const link of links) for (const chunk of link.held.splice(0)) link.upstream.write(chunk);
    },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** A migrated store on a fresh MySQL database reached through a proxy the test can cut; close() closes and drops it all. */
export async function storeBehindProxy(db: TestDatabase): Promise<{ store: Store; proxy: TcpProxy; close(): Promise<void> }> {
  const created = await db.create();
  const target = new URL(created.url);
  const proxy = await startTcpProxy(target.hostname, Number(target.port || 3306));
  target.port = String(proxy.port);
  const store = await Store.open(target.toString(), { rollouts: storeDecisions });
  return {
    store,
    proxy,
    async close() {
      await store.close();
      await proxy.close();
      await created.drop();
    },
  };
}
