// B10: the CLI's own cost, as the images ship it (one file built by deploy/bundle.ts). Cold
// starts of `flotilla version` and of `flotilla get deployments` with 1,000 deployments,
// beside `node -e 0` in the same run (the floor any Node CLI pays); and `flotilla apply -f` of
// a directory of 1,000 manifests against the same 1,000 creates made by a Connect client in
// one process.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { Store } from "@flotilla/store";
import { adminAuth } from "./lib/clients.ts";
import { ADMIN_TOKEN, CtrlProcess } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate } from "./lib/db.ts";
import type { BenchContext, BenchResult } from "./lib/report.ts";
import { fmtMs, fmtRatio, log, median, now } from "./lib/util.ts";

const SOURCES = fileURLToPath(import.meta.resolve("@flotilla/cli/main"));
const BUNDLER = new URL("../deploy/bundle.ts", import.meta.url).pathname;
const REGION = "b10";

export async function runB10(ctx: BenchContext): Promise<BenchResult> {
  const count = ctx.quick ? 200 : 1000;
  const runs = ctx.quick ? 5 : 11;
  const db = await createBenchDatabase(ctx.serverUrl, "b10");
  const dir = mkdtempSync(join(tmpdir(), "flotilla-b10-"));
  let ctrl: CtrlProcess | undefined;
  try {
    await migrate(db.url);
    const store = await Store.open(db.url);
    await store.regions.create(REGION);
    await store.close();
    ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs });
    const CLI = join(dir, "flotilla.mjs");
    execFileSync(process.execPath, [BUNDLER, SOURCES, CLI]);
    const env = { PATH: process.env.PATH, FLOTILLA_SERVER: ctrl.url, FLOTILLA_TOKEN: ADMIN_TOKEN, FLOTILLA_CONFIG: join(dir, "config.yaml") };
    const timed = (args: string[]) => {
      const t0 = now();
      execFileSync(process.execPath, args, { env, stdio: "ignore" });
      return now() - t0;
    };
    const coldStart = (args: string[]) => median(Array.from({ length: runs }, () => timed(args)));

    // apply: a directory of manifests, one per file, as a repository keeps them.
    const manifests = join(dir, "fleet");
    execFileSync("mkdir", ["-p", manifests]);
    const manifest = (i: number, prefix: string) =>
      `apiVersion: flotilla.dev/v1\nkind: Deployment\nmetadata:\n  name: ${prefix}-${i}\nspec:\n  namespace: bench\n  image: app:1\n  port: 8080\n  regions:\n    - region: ${REGION}\n      replicas: 1\n`;
    for (let i = 0; i < count; i++) writeFileSync(join(manifests, `d-${String(i).padStart(4, "0")}.yaml`), manifest(i, "cli"));
    const applyMs = timed([CLI, "apply", "-f", manifests]);
    // The same creates from one process with a Connect client, one after another as the CLI makes them.
    const deployments = createClient(
      DeploymentService,
      createConnectTransport({
        baseUrl: ctrl.url,
        httpVersion: "1.1",
        interceptors: [adminAuth],
      }),
    );
    const t0 = now();
    for (let i = 0; i < count; i++) {
      await deployments.createDeployment({
        deployment: { id: `direct-${i}`, namespace: "bench", image: "app:1", port: 8080, regions: [{ region: REGION, replicas: 1 }] },
      });
    }
    const directMs = now() - t0;

    const nodeFloor = coldStart(["-e", "0"]);
    const version = coldStart([CLI, "version"]);
    const get = coldStart([CLI, "get", "deployments"]);
    const fromSources = coldStart([SOURCES, "version"]);
    log(
      `B10: node -e 0 ${fmtMs(nodeFloor)}, version ${fmtMs(version)}, get ${count * 2} deployments ${fmtMs(get)}; apply ${count}: ${fmtMs(applyMs)} (direct ${fmtMs(directMs)})`,
    );
    const rate = (ms: number) => (count / ms) * 1000;
    return {
      rows: [
        {
          benchmark: "B10 cold start: flotilla version",
          measured: fmtMs(version),
          reference: `node -e 0: ${fmtMs(nodeFloor)}`,
          ratio: fmtRatio(version / nodeFloor),
          target: "≤ 300 ms",
          met: version <= 300,
        },
        {
          benchmark: `B10 cold start: flotilla get deployments (${count * 2})`,
          measured: fmtMs(get),
          reference: `node -e 0: ${fmtMs(nodeFloor)}`,
          ratio: fmtRatio(get / nodeFloor),
          target: "≤ 300 ms",
          met: get <= 300,
        },
        {
          benchmark: `B10 flotilla apply -f, ${count} manifests`,
          measured: `${rate(applyMs).toFixed(0)}/s`,
          reference: `Connect client: ${rate(directMs).toFixed(0)}/s`,
          ratio: fmtRatio(directMs / applyMs),
          target: "≥ 0.5×",
          met: directMs / applyMs >= 0.5,
        },
      ],
      notes: [
        `B10: medians of ${runs} cold starts of the bundle; \`flotilla version\` from the TypeScript sources (\`pnpm flotilla\` in the repository) takes ${fmtMs(fromSources)}. apply plans (a Get per manifest), checks every change (validate_only), then writes: three calls per created object, 8 in flight.`,
      ],
    };
  } finally {
    await ctrl?.stop();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
