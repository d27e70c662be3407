// A ctrl on a fresh database and a random port, with clients for each protocol.
import { randomBytes } from "node:crypto";
import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { generateKeyFile, SecretKeyRing, type Store, type StoreOptions } from "@flotilla/store";
import { startCtrl, type Ctrl, type CtrlOptions } from "@flotilla/ctrl";
import { createLogger, type Logger, type LogLevel } from "@flotilla/runtime";
import { freshStore, type TestDatabase } from "./databases.ts";

export const ADMIN_TOKEN = "test-admin-token";

/**
 * ctrl's logger in tests: warnings and errors only, so that a real failure stands out of the
 * output; FLOTILLA_TEST_LOG_LEVEL=debug (or info) shows every call when debugging a test.
 */
export function testLogger(): Logger {
  return createLogger({ level: (process.env.FLOTILLA_TEST_LOG_LEVEL as LogLevel | undefined) ?? "warn", fields: { process: "ctrl" } });
}

export type Protocol = "connect" | "grpc" | "grpcweb";

/**
 * `ca`: the CA to trust when ctrl serves TLS. `windowBytes`: the HTTP/2 stream window (a
 * client that reads slowly holds ctrl back by this much).
 */
export type TransportOptions = { token?: string | null; protocol?: Protocol; ca?: Buffer; windowBytes?: number };

export interface TestCtrl {
  ctrl: Ctrl;
  store: Store;
  url: string;
  databaseUrl: string;
  client<S extends DescService>(service: S, options?: TransportOptions): Client<S>;
  transport(options?: TransportOptions): Transport;
  /** Stops ctrl and starts another on the same port and database: a restart, as clients see it. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

export async function startTestCtrl(db: TestDatabase, options: Partial<CtrlOptions> = {}, storeOptions?: StoreOptions): Promise<TestCtrl> {
  const { store, url: databaseUrl, cleanup } = await freshStore(db, storeOptions);
  // No memory release: it would collect the whole test process's garbage every few seconds
  // (tests of it run ctrl as a process of its own).
  const ctrlOptions = { store, adminToken: ADMIN_TOKEN, port: 0, shutdownGraceMs: 500, log: testLogger(), memoryReleaseGrowthBytes: 0, ...options };
  let ctrl = await startCtrl(ctrlOptions);
  const transports: Transport[] = [];
  const transport: TestCtrl["transport"] = ({ token = ADMIN_TOKEN, protocol = "connect", ca, windowBytes } = {}) => {
    const auth: Interceptor = (next) => (req) => {
      if (token !== null) req.header.set("authorization", `Bearer ${token}`);
      return next(req);
    };
    const settings = windowBytes === undefined ? undefined : { initialWindowSize: windowBytes };
    const common = { baseUrl: ctrl.url, interceptors: [auth], nodeOptions: ca || settings ? { ca, settings } : undefined };
    const t =
      protocol === "grpc"
        ? createGrpcTransport(common)
        : protocol === "grpcweb"
          ? createGrpcWebTransport({ ...common, httpVersion: "1.1" })
          : createConnectTransport({ ...common, httpVersion: "1.1" });
    transports.push(t);
    return t;
  };
  return {
    get ctrl() {
      return ctrl;
    },
    store,
    url: ctrl.url,
    databaseUrl,
    transport,
    client: (service, opts) => createClient(service, transport(opts)),
    async restart() {
      await ctrl.shutdown();
      ctrl = await startCtrl({ ...ctrlOptions, port: Number(new URL(ctrl.url).port) });
    },
    async close() {
      await ctrl.shutdown();
      await cleanup();
    },
  };
}

/** Clients of a ctrl at `url` (e.g. a process of its own) with `token`, over HTTP/2 gRPC. */
export function clientsOf(url: string, token: string): Pick<TestCtrl, "client"> {
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  return { client: (service) => createClient(service, createGrpcTransport({ baseUrl: url, interceptors: [auth] })) };
}

/** A key ring of one fresh data key, for a ctrl that takes secret values (StoreOptions.secrets). */
export function testSecretKeyRing(): SecretKeyRing {
  return SecretKeyRing.parse(generateKeyFile("test"), "test key file");
}

/** Row counts of every table: a failed write must leave them all unchanged. */
export async function rowCounts(store: Store): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of [
    "regions",
    "deployments",
    "sentinels",
    "network_policies",
    "placements",
    "desired_resources",
    "deployment_changes",
    "agent_tokens",
    "operators",
    "resource_revisions",
    "audit_events",
    "status_events",
    "projects",
    "notifiers",
    "notification_events",
    "notification_deliveries",
  ] as const) {
    let query = store.database.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as("n"));
    // A refused attempt is recorded ("denied"): the audit of what was refused, not a write of it.
    if (table === "audit_events") query = query.where("decision" as never, "=", "allowed" as never);
    const row = await query.executeTakeFirstOrThrow();
    counts[table] = Number(row.n);
  }
  const heads = await store.database.db.selectFrom("regions").select(["name", "head_version"]).orderBy("name").execute();
  for (const h of heads) counts[`head:${h.name}`] = Number(h.head_version);
  return counts;
}

/**
 * Creates `count` deployments `d0`, `d1`, … in `region`, each with 32 KB of random hex in its
 * env (about 18 KB gzipped): a sync of them outgrows any client's HTTP/2 window.
 */
/** `t` may be any ctrl with a client: in this process (TestCtrl) or a process of its own (clientsOf). */
export async function createBulkyDeployments(t: Pick<TestCtrl, "client">, region: string, count: number, bytes = 32_768): Promise<void> {
  const deployments = t.client(DeploymentService);
  for (let i = 0; i < count; i++) {
    // Values of at most 32 KB (ctrl's limit per value).
    const env = Array.from({ length: Math.ceil(bytes / 32_768) }, (_, n) => ({
      name: `NOISE${n}`,
      value: randomBytes(Math.min(32_768, bytes - n * 32_768) / 2).toString("hex"),
    }));
    await deployments.createDeployment({ deployment: { id: `d${i}`, namespace: "ns", image: `app:${i}`, env, regions: [{ region, replicas: 1 }] } });
  }
}
