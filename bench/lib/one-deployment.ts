// The watch diagnostics' setup: a database with one region holding one deployment, and writes
// that give it a new image, each waited for on every stream of a fleet.
import { create } from "@bufbuild/protobuf";
import { DeploymentSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { Store } from "@flotilla/store";
import type { WatchReader } from "./clients.ts";
import type { CtrlProcess } from "./ctrl-process.ts";
import { createBenchDatabase, migrate, type BenchDatabase } from "./db.ts";
import { waitFor } from "./util.ts";

export interface OneDeployment {
  db: BenchDatabase;
  /** One same-process write (one new version), then waits until every stream has it. */
  write(ctrl: CtrlProcess, fleet: WatchReader): Promise<{ version: number; committedAt: number }>;
}

export async function oneDeployment(name: string, region: string): Promise<OneDeployment> {
  const db = await createBenchDatabase(process.env.FLOTILLA_BENCH_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/", name);
  await migrate(db.url);
  const store = await Store.open(db.url);
  try {
    await store.regions.create(region);
    await store.deployments.create(
      create(DeploymentSchema, { id: "d-0", namespace: "bench", image: "app:w0", port: 8080, regions: [{ region, replicas: 1 }] }),
    );
  } finally {
    await store.close();
  }
  let seq = 0;
  return {
    db,
    async write(ctrl, fleet) {
      const version = Math.max(...fleet.streams.map((s) => s.version)) + 1;
      const committedAt = await ctrl.write("update", { id: "d-0", namespace: "bench", image: `app:w${++seq}`, region, replicas: 1 });
      await waitFor("the write on every stream", () => fleet.behind(version) === 0, 30_000, 2);
      return { version, committedAt };
    },
  };
}
