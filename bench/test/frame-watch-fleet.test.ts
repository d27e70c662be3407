// B2's frame reader (FrameWatchFleet) against a real ctrl, plaintext and over TLS: it sees what
// Node's HTTP/2 client (WatchFleet) sees on the same streams, every version and event, and it
// counts a stream that ctrl ends as failed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, startTestCtrl } from "@flotilla/testkit/ctrl";
import { WatchFleet, type WatchReader } from "../lib/clients.ts";
import { FrameWatchFleet, hpackLiterals } from "../lib/frame-watch-fleet.ts";
import { benchTls } from "../lib/tls.ts";
import { waitFor } from "../lib/util.ts";

const [{ db }] = await testDatabases();

test("hpackLiterals writes literal fields without indexing, lengths from 127 in several bytes", () => {
  const long = "v".repeat(300);
  const bytes = hpackLiterals([
    [":path", "/x"],
    ["a", long],
  ]);
  // 300 = 127 + 173: 0x7f, then 173 in 7-bit groups, least significant first (0xad, 0x01).
  assert.deepEqual(
    bytes,
    Buffer.concat([
      Buffer.from([0, 5]),
      Buffer.from(":path"),
      Buffer.from([2]),
      Buffer.from("/x"),
      Buffer.from([0, 1]),
      Buffer.from("a"),
      Buffer.from([0x7f, 0xad, 0x01]),
      Buffer.from(long),
    ]),
  );
});

for (const transport of ["plaintext", "tls"] as const) {
  test(`the frame reader sees what Node's client sees, ${transport}`, async () => {
    const pki = transport === "tls" ? benchTls() : undefined;
    const t = await startTestCtrl(db, pki ? { tls: pki.server } : {});
    try {
      await t.client(RegionService, { ca: pki?.ca }).createRegion({ region: { name: "r" } });
      const deployments = t.client(DeploymentService, { ca: pki?.ca });
      const deployment = (image: string) => ({ id: "d", namespace: "ns", image, port: 8080, regions: [{ region: "r", replicas: 1 }] });
      await deployments.createDeployment({ deployment: deployment("app:0") });
      const options = { connections: 2, versionLastSeen: 0, ca: pki?.ca, token: ADMIN_TOKEN };
      const fleets: WatchReader[] = [new FrameWatchFleet(t.url, "r", 5, options), new WatchFleet(t.url, "r", 5, options)];
      try {
        for (let i = 1; i <= 3; i++) await deployments.updateDeployment({ deployment: deployment(`app:${i}`) });
        // Region creation is version 0; the create and the 3 updates are versions 1 to 4.
        await waitFor("every stream at version 4", () => fleets.every((f) => f.behind(4) === 0), 10_000);
        const [frames, node] = fleets.map((f) => f.streams.map((s) => ({ version: s.version, events: s.events, error: s.error })));
        assert.deepEqual(frames, node);
        assert.deepEqual(
          frames!.map((s) => [s.version, s.events]),
          Array.from({ length: 5 }, () => [4, 4]),
        );
      } finally {
        // ctrl's shutdown ends every stream (UNAVAILABLE): the frame reader counts each failed.
        await t.close();
        await waitFor("every stream failed", () => fleets[0]!.errors.length === 5, 10_000);
        await Promise.all(fleets.map((f) => f.close()));
        pki?.cleanup();
      }
    } finally {
      await t.close();
    }
  });
}
