// The reporter against a recording client: each observation goes out stamped with the time of
// its call, and one equal to the last sent for its key (timestamps aside) is not sent again.
import { test } from "node:test";
import { silentLogger } from "@flotilla/runtime";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import {
  ResourceObservationSchema,
  type ClusterService,
  type ReportObservedStateRequest,
  type ResourceObservation,
} from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { AgentMetrics } from "../src/metrics.ts";
import type { ObservationSource } from "../src/observation.ts";
import { Reporter } from "../src/reporter.ts";

test("observations are sent stamped; an unchanged one is not sent again, a changed one is", async () => {
  const applied = new Map([["deployment/web", 1n]]);
  const source: ObservationSource = {
    observe: (key): ResourceObservation | undefined =>
      applied.has(key)
        ? create(ResourceObservationSchema, { type: ResourceType.DEPLOYMENT, id: key.split("/")[1], appliedVersion: applied.get(key) })
        : undefined,
    keys: () => applied.keys(),
    isKnown: (key) => applied.has(key),
  };
  const calls: ReportObservedStateRequest[] = [];
  const client = {
    reportObservedState: async (request: ReportObservedStateRequest) => {
      calls.push(request);
      return {};
    },
  } as unknown as Client<typeof ClusterService>;
  const reporter = new Reporter({
    client,
    region: "r",
    source,
    cursor: () => 7,
    reportIntervalMs: 5,
    heartbeatIntervalMs: 60_000,
    callTimeoutMs: 10_000,
    metrics: new AgentMetrics(),
    log: silentLogger,
  });
  const stop = new AbortController();
  const running = reporter.run(stop.signal);
  const sent = () => calls.flatMap((call) => call.observations.map((o) => `${o.id}@${o.appliedVersion}`));
  try {
    await waitUntil(() => calls.length === 1);
    assert.ok(calls[0].fullSet, "the first call is the full set");
    assert.ok(
      calls[0].observations.every((o) => o.observedAt !== undefined),
      "stamped",
    );

    reporter.touch("deployment/web");
    await sleep(50);
    assert.deepEqual(sent(), ["web@1"], "unchanged: not sent again");

    applied.set("deployment/web", 2n);
    reporter.touch("deployment/web");
    await waitUntil(() => calls.length === 2);
    assert.deepEqual(sent(), ["web@1", "web@2"]);
    assert.equal(calls[1].fullSet, false);
    assert.ok(calls[1].observations[0].observedAt, "stamped");
  } finally {
    stop.abort();
    await running;
  }
});

async function waitUntil(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await sleep(10);
  assert.ok(condition(), "timed out");
}
