// B8's hostile clients, in a process of their own (so their CPU does not delay the
// well-behaved client's measurements in the parent). Started by b8-hostile.ts with the
// plan in FLOTILLA_B8_ATTACK; reports each attack's counts over IPC, then exits.
// Loopback only, every loop bounded.
import http from "node:http";
import http2 from "node:http2";
import { randomBytes } from "node:crypto";
import { setPriority } from "node:os";
import { create, toBinary } from "@bufbuild/protobuf";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { GetRegionRequestSchema } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { rawGrpcCall } from "@flotilla/testkit/interop";

export interface AttackPlan {
  url: string;
  adminToken: string;
  region: string;
  malformed: number;
  forgedTokens: number;
  rapidResets: number;
  stalledStreams: number;
  /** The region the stalled streams sync. */
  stalledRegion: string;
}

export interface AttackReport {
  attack: string;
  sent: number;
  /** Answers by grpc-status / HTTP status / outcome. */
  outcomes: Record<string, number>;
  seconds: number;
}

const plan = JSON.parse(process.env.FLOTILLA_B8_ATTACK ?? "{}") as AttackPlan;
if (!process.send) throw new Error("b8-attacker.ts must be started by b8-hostile.ts (IPC channel)");
// The lowest CPU priority: on a machine it shares with ctrl, the attacker's own CPU would
// otherwise count against ctrl (a real attacker's CPU is its own); it still gets all that is left.
setPriority(19);

const CONCURRENCY = 64;
const SESSIONS = 8;

/** Runs `count` calls of `one`, `CONCURRENCY` at a time, counting their outcomes. */
async function hammer(attack: string, count: number, one: (i: number) => Promise<string>): Promise<AttackReport> {
  const outcomes: Record<string, number> = {};
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) {
        const outcome = await one(next++).catch((error: Error & { code?: string }) => error.code ?? error.message);
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      }
    }),
  );
  return { attack, sent: count, outcomes, seconds: (performance.now() - started) / 1000 };
}

/**
 * HTTP/2 sessions reused round-robin; a session that went away (ctrl ends one after
 * --max-auth-failures-per-connection failed authentications) is replaced, so the attack
 * goes on at the cost of a new connection. `opened` counts them.
 */
function sessionPool() {
  const sessions: http2.ClientHttp2Session[] = [];
  const pool = {
    opened: 0,
    get(i: number): http2.ClientHttp2Session {
      let s = sessions[i % SESSIONS];
      if (!s || s.closed || s.destroyed) {
        s = http2.connect(plan.url);
        pool.opened++;
        s.on("error", () => {});
        s.on("goaway", () => s!.destroy());
        sessions[i % SESSIONS] = s;
      }
      return s;
    },
    close: () => {
      // Sparse: only the slots used so far hold a session.
      for (const s of sessions) s?.destroy();
    },
  };
  return pool;
}

/** One gRPC call; resolves with its grpc-status (or how it failed). */
function grpcCall(session: http2.ClientHttp2Session, path: string, headers: Record<string, string>, body: Uint8Array): Promise<string> {
  return new Promise((resolve) => {
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
    let status = "no status";
    const read = (h: http2.IncomingHttpHeaders) => {
      if (h["grpc-status"] !== undefined) status = `grpc ${h["grpc-status"]}`;
    };
    stream.on("response", read);
    stream.on("trailers", read);
    stream.on("data", () => {});
    stream.on("close", () => resolve(status));
    stream.on("error", (e: Error & { code?: string }) => (status = e.code ?? "error"));
    stream.end(body);
  });
}

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
// HTTP/1.1 connections opened (a `connection: close` answer costs the next request a new one).
let h1Connections = 0;
const createConnection = agent.createConnection.bind(agent);
agent.createConnection = (...args) => {
  h1Connections++;
  return createConnection(...args);
};

function h1Call(path: string, headers: Record<string, string>, body: Buffer): Promise<string> {
  return new Promise((resolve) => {
    const req = http.request(`${plan.url}${path}`, { method: "POST", agent, headers: { ...headers, "content-length": String(body.length) } }, (res) => {
      res.resume();
      res.on("end", () => resolve(`http ${res.statusCode}`));
    });
    req.on("error", (e: Error & { code?: string }) => resolve(e.code ?? "error"));
    req.end(body);
  });
}

async function malformed(): Promise<AttackReport> {
  const pool = sessionPool();
  const garbage = () => randomBytes(1 + Math.floor(Math.random() * 64));
  try {
    // Four kinds in turn: no token (gRPC), a bad body with a good token (gRPC), no token
    // (Connect JSON over HTTP/1.1), a bad body with a good token (Connect proto over HTTP/1.1).
    const report = await hammer("malformed / unauthenticated requests", plan.malformed, (i) => {
      const auth = { authorization: `Bearer ${plan.adminToken}` };
      switch (i % 4) {
        case 0:
          return grpcCall(pool.get(i), "/ctrl.v1.DeploymentService/GetDeployment", {}, encodeEnvelope(0, garbage()));
        case 1:
          return grpcCall(pool.get(i), "/ctrl.v1.ClusterService/WatchDeploymentChanges", auth, encodeEnvelope(0, Buffer.from([0xff, 0xff, 0xff])));
        case 2:
          return h1Call("/ctrl.v1.DeploymentService/GetDeployment", { "content-type": "application/json" }, garbage());
        default:
          return h1Call("/ctrl.v1.DeploymentService/GetDeployment", { ...auth, "content-type": "application/proto" }, Buffer.from([0x0a, 0x05, 0x61]));
      }
    });
    return { ...report, outcomes: { ...report.outcomes, "HTTP/2 connections": pool.opened, "HTTP/1.1 connections": h1Connections } };
  } finally {
    pool.close();
  }
}

async function forgedTokens(): Promise<AttackReport> {
  const pool = sessionPool();
  const body = encodeEnvelope(0, toBinary(GetRegionRequestSchema, create(GetRegionRequestSchema, { name: plan.region })));
  try {
    const report = await hammer("forged tokens", plan.forgedTokens, (i) =>
      grpcCall(pool.get(i), "/ctrl.v1.RegionService/GetRegion", { authorization: `Bearer ${forgedAgentToken(i)}` }, body),
    );
    return { ...report, outcomes: { ...report.outcomes, "HTTP/2 connections": pool.opened } };
  } finally {
    pool.close();
  }
}

/**
 * A forgery as well formed as a real agent token: its prefix and length, in turn of the
 * current format (32 random bytes and a 16-byte MAC) and of tokens minted before MACs (32
 * random bytes), so that no check of the format alone tells it from a real one.
 */
function forgedAgentToken(i: number): string {
  return `flt_agent_${randomBytes(i % 2 === 0 ? 48 : 32).toString("base64url")}`;
}

async function rapidResets(): Promise<AttackReport> {
  const outcomes: Record<string, number> = {};
  const started = performance.now();
  let sent = 0;
  let connections = 0;
  while (sent < plan.rapidResets) {
    // Open a stream and reset it at once, as fast as possible, until ctrl ends the connection.
    const session = http2.connect(plan.url);
    connections++;
    session.on("error", () => {});
    const away = new Promise<string>((resolve) => {
      session.once("goaway", (code) => resolve(`goaway ${code}`));
      session.once("close", () => resolve("closed"));
    });
    await new Promise((resolve) => session.once("connect", resolve));
    while (sent < plan.rapidResets && !session.closed && !session.destroyed) {
      const stream = session.request({ ":method": "POST", ":path": "/ctrl.v1.RegionService/GetRegion", "content-type": "application/grpc" });
      stream.on("error", () => {});
      stream.close(http2.constants.NGHTTP2_CANCEL);
      sent++;
      if (sent % 16 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    const end = await Promise.race([away, new Promise<string>((resolve) => setTimeout(() => resolve("still open"), 1000))]);
    outcomes[end] = (outcomes[end] ?? 0) + 1;
    session.destroy();
  }
  outcomes.connections = connections;
  return { attack: "rapid resets", sent, outcomes, seconds: (performance.now() - started) / 1000 };
}

/** Syncs from clients that never read (a 1 KiB HTTP/2 window they never open); resolves once ctrl has ended them all. */
async function stalledStreams(): Promise<AttackReport> {
  const started = performance.now();
  const calls = Array.from({ length: plan.stalledStreams }, () =>
    rawGrpcCall(plan.url, ClusterService.method.syncDesiredState, { region: plan.stalledRegion }, plan.adminToken, { initialWindowSize: 1024 }),
  );
  const outcomes: Record<string, number> = {};
  for (const call of calls) {
    const { rstCode } = await call.result;
    call.close();
    outcomes[`rst ${rstCode}`] = (outcomes[`rst ${rstCode}`] ?? 0) + 1;
  }
  return { attack: "stalled streams", sent: plan.stalledStreams, outcomes, seconds: (performance.now() - started) / 1000 };
}

const reports = await Promise.all([malformed(), forgedTokens(), rapidResets(), stalledStreams()]);
agent.destroy();
process.send(reports, () => process.exit(0));
