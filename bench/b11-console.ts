// B11: the web console on a large fleet, in headless Chromium (Debian's, through
// playwright-core). 10,000 deployments × 3 regions: time to the first rendered Deployments
// view, beside fetching the same list with a Connect client in this process; a status change
// reported for a region reaching the page (p50/p99 of 50 changes); the page's JS heap after a
// stretch of 10 status changes per second; the assets' size, gzipped.
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { StatusService } from "@flotilla/proto/ctrl/v1/status_pb.js";
import { launchChromium } from "@flotilla/testkit/browser";
import { adminAuth } from "./lib/clients.ts";
import { ADMIN_TOKEN, CtrlProcess } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate } from "./lib/db.ts";
import type { BenchContext, BenchResult } from "./lib/report.ts";
import { fmtBytes, fmtMs, fmtRatio, log, now, percentile, sleep } from "./lib/util.ts";

const REGIONS = ["eu", "us", "ap"];

/** What the page function reads of the page's globals. */
interface PageGlobals {
  document: { querySelector(selector: string): { textContent: string | null } | null };
}

export async function runB11(ctx: BenchContext): Promise<BenchResult> {
  const count = ctx.quick ? 1000 : 10_000;
  const sustainMs = ctx.quick ? 30_000 : 600_000;
  const db = await createBenchDatabase(ctx.serverUrl, "b11");
  let ctrl: CtrlProcess | undefined;
  const browser = await launchChromium();
  try {
    await migrate(db.url);
    ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs });
    const transport = createConnectTransport({
      baseUrl: ctrl.url,
      httpVersion: "1.1",
      interceptors: [adminAuth],
    });
    const deployments = createClient(DeploymentService, transport);
    const cluster = createClient(ClusterService, transport);
    const regions = createClient(RegionService, transport);
    for (const name of REGIONS) await regions.createRegion({ region: { name } });
    let next = 0;
    const t0 = now();
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = next++; i < count; i = next++) {
          await deployments.createDeployment({
            deployment: {
              id: `app-${String(i).padStart(5, "0")}`,
              namespace: `team-${i % 40}`,
              image: `app:${i % 7}`,
              regions: REGIONS.map((region) => ({ region, replicas: 2 })),
            },
          });
        }
      }),
    );
    log(`B11: ${count} deployments × ${REGIONS.length} regions created in ${fmtMs(now() - t0)}`);

    // The reference: the same list, fetched by a client in this process.
    const direct = now();
    let pageToken = "";
    do pageToken = (await deployments.listDeployments({ pageSize: 1000, pageToken })).nextPageToken;
    while (pageToken);
    const directMs = now() - direct;

    const page = await browser.newPage();
    await page.addInitScript((token) => sessionStorage.setItem("flotilla.token", token), ADMIN_TOKEN);
    const start = now();
    await page.goto(`${ctrl.url}/#/deployments`);
    await page.locator("tr[data-row]").first().waitFor({ timeout: 120_000 });
    const firstViewMs = now() - start;
    log(`B11: first Deployments view ${fmtMs(firstViewMs)} (direct list ${fmtMs(directMs)})`);

    // Status changes for one deployment in one region, each with a new ready count.
    const target = "app-00000";
    await page.getByLabel("Search").fill(target);
    await page.getByLabel("Region").selectOption("eu");
    const report = (ready: number) =>
      cluster.reportObservedState({
        region: "eu",
        observations: [
          {
            type: ResourceType.DEPLOYMENT,
            id: target,
            appliedVersion: 1n,
            observedImage: "app:0",
            desiredReplicas: 2,
            updatedReplicas: 2,
            readyReplicas: ready,
            availableReplicas: ready,
            replicas: 2,
          },
        ],
      });
    // The same changes as a Node client of the status stream sees them: ctrl's part of the
    // latency, without the browser's animation frames.
    const streamAbort = new AbortController();
    const streamArrivals: { ready: number; at: number }[] = [];
    const stream = createClient(StatusService, transport).watchStatus({ resourceType: ResourceType.DEPLOYMENT, id: target }, { signal: streamAbort.signal });
    const following = (async () => {
      for await (const r of stream) {
        if (r.event.case !== "object") continue;
        const eu = r.event.value.regions.find((s) => s.region === "eu");
        if (eu) streamArrivals.push({ ready: eu.readyReplicas, at: now() });
      }
    })().catch(() => {});
    const latencies: number[] = [];
    const streamLatencies: number[] = [];
    for (let i = 0; i < 50; i++) {
      const ready = i % 2 === 0 ? 1 : 2;
      const sent = now();
      const seen = streamArrivals.length;
      await report(ready);
      await page.waitForFunction(
        // Runs in the page (where `document` is; this file is typed for Node).
        ([selector, expected]) => (globalThis as unknown as PageGlobals).document.querySelector(selector)?.textContent === expected,
        [`tr[data-row="${target}/eu"] td:nth-of-type(4)`, `${ready}/2`] as const,
        { polling: "raf", timeout: 10_000 },
      );
      latencies.push(now() - sent);
      const arrival = streamArrivals.slice(seen).find((a) => a.ready === ready);
      if (arrival) streamLatencies.push(arrival.at - sent);
    }
    streamAbort.abort();
    await following;

    // A sustained 10 changes per second over many deployments, then the page's heap.
    const heap = async () => {
      const client = await page.context().newCDPSession(page);
      await client.send("HeapProfiler.collectGarbage");
      const { usedSize } = (await client.send("Runtime.getHeapUsage")) as { usedSize: number };
      await client.detach();
      return usedSize;
    };
    const heapBefore = await heap();
    const sustainStart = now();
    for (let i = 0; now() - sustainStart < sustainMs; i++) {
      const id = `app-${String(i % count).padStart(5, "0")}`;
      await cluster.reportObservedState({
        region: REGIONS[i % REGIONS.length]!,
        observations: [
          {
            type: ResourceType.DEPLOYMENT,
            id,
            appliedVersion: 1n,
            observedImage: `app:${(i % count) % 7}`,
            desiredReplicas: 2,
            updatedReplicas: 2,
            readyReplicas: i % 3,
            availableReplicas: i % 3,
            replicas: 2,
          },
        ],
      });
      await sleep(Math.max(0, sustainStart + (i + 1) * 100 - now()));
    }
    await sleep(2000);
    const heapAfter = await heap();

    const dist = (file: string) => readFileSync(fileURLToPath(import.meta.resolve(`@flotilla/console/dist/${file}`)));
    const gzipped = ["app.js", "app.css", "index.html"].reduce((sum, f) => sum + gzipSync(dist(f)).length, 0);
    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    return {
      rows: [
        {
          benchmark: `B11 console: first Deployments view, ${count} deployments × ${REGIONS.length} regions`,
          measured: fmtMs(firstViewMs),
          reference: `Connect client lists them: ${fmtMs(directMs)}`,
          ratio: fmtRatio(firstViewMs / directMs),
          target: "≤ 1.5 s",
          met: firstViewMs <= 1500,
        },
        {
          benchmark: "B11 console: a reported status change on the page, p99",
          measured: fmtMs(p99),
          reference: `p50 ${fmtMs(p50)}; a Node client's stream: p50 ${fmtMs(percentile(streamLatencies, 50))}, p99 ${fmtMs(percentile(streamLatencies, 99))}`,
          ratio: "—",
          target: "≤ 50 ms",
          met: p99 <= 50,
        },
        {
          benchmark: `B11 console: page JS heap after ${Math.round(sustainMs / 1000)} s of 10 changes/s`,
          measured: fmtBytes(heapAfter),
          reference: `before: ${fmtBytes(heapBefore)}`,
          ratio: fmtRatio(heapAfter / heapBefore),
          target: "bounded (reported)",
          met: undefined,
        },
        { benchmark: "B11 console: assets, gzipped", measured: fmtBytes(gzipped), reference: "—", ratio: "—", target: "≤ 200 KB", met: gzipped <= 200 * 1024 },
      ],
      notes: [
        `B11: status changes are ReportObservedState calls (the admin token) for one deployment and region, 50 of them, each waited for on the page (checked every animation frame); a Node client following the same deployment's status stream (${streamLatencies.length}/50 changes seen) gives ctrl's part of the latency.`,
      ],
    };
  } finally {
    await browser.close();
    await ctrl?.stop();
    await db.drop();
  }
}
