// What single sign-on costs a caller of the operator API beside a static operator token, in one
// run against one ctrl process: 20 projects, each granting the same role to an operator account
// (its static token) and to a group (an OIDC ID token, signed by a local ES256 key whose JWKS
// this process serves as the issuer). Each round makes the console's calls with both
// credentials, alternating: ListDeployments (every page; the caller sees all 20 projects) and
// GetDeployment of deployments across the projects. Prints each credential's p50 and p99 per
// call and their ratio, and what verifying an ID token costs per call: p50/p99 of
// OidcVerifier.verify on tokens it has not seen (ctrl verifies a token once and caches it until
// it expires or its key set is due: auth.ts).
//   node bench/diag/oidc-cost.ts [rounds] [deployments]
import type { DescService } from "@bufbuild/protobuf";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { OidcVerifier } from "@flotilla/ctrl/oidc-verifier";
import { serviceClient } from "../lib/clients.ts";
import { ADMIN_TOKEN, CtrlProcess } from "../lib/ctrl-process.ts";
import { createBenchDatabase, migrate } from "../lib/db.ts";
import { BENCH_CLIENT_ID, localIssuer } from "../lib/oidc-issuer.ts";
import { createProjects, projectGroup, projectName, projectNamespace } from "../lib/projects.ts";
import { fmtMs, fmtRatio, now, percentile } from "../lib/util.ts";

const PROJECTS = 20;
const rounds = Number(process.argv[2] ?? 30);
const deploymentCount = Number(process.argv[3] ?? 1000);

const idp = await localIssuer();
const db = await createBenchDatabase(process.env.FLOTILLA_BENCH_MYSQL_URL ?? "mysql://root@127.0.0.1:3306", "oidc");
let ctrl: CtrlProcess | undefined;
try {
  await migrate(db.url);
  ctrl = await CtrlProcess.start({
    databaseUrl: db.url,
    pollIntervalMs: 200,
    sso: idp.sso,
  });
  const client = <S extends DescService>(service: S, token: string) => serviceClient(service, ctrl!.url, token);
  await client(RegionService, ADMIN_TOKEN).createRegion({ region: { name: "east" } });
  const staticToken = await createProjects(ctrl.url, PROJECTS, Role.VIEWER, "viewer-op");
  const admin = client(DeploymentService, ADMIN_TOKEN);
  const ids: string[] = [];
  for (let i = 0; i < deploymentCount; i++) {
    const p = i % PROJECTS;
    ids.push(`d${i}`);
    await admin.createDeployment({
      deployment: { id: `d${i}`, project: projectName(p), namespace: projectNamespace(p), image: "app:1", regions: [{ region: "east", replicas: 1 }] },
    });
  }
  const oidcToken = idp.token(
    "alice",
    Array.from({ length: PROJECTS }, (_, p) => projectGroup(p)),
  );
  const callers = { static: client(DeploymentService, staticToken), oidc: client(DeploymentService, oidcToken) };
  const samples = { static: { list: [] as number[], get: [] as number[] }, oidc: { list: [] as number[], get: [] as number[] } };
  const round = async (who: "static" | "oidc", record: boolean) => {
    const deployments = callers[who];
    let seen = 0;
    let pageToken = "";
    do {
      const t0 = now();
      const page = await deployments.listDeployments({ pageSize: 1000, pageToken });
      if (record) samples[who].list.push(now() - t0);
      seen += page.deployments.length;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    if (seen !== deploymentCount) throw new Error(`${who} saw ${seen} of ${deploymentCount} deployments`);
    for (let i = 0; i < 50; i++) {
      const t0 = now();
      await deployments.getDeployment({ id: ids[(i * 37) % ids.length]! });
      if (record) samples[who].get.push(now() - t0);
    }
  };
  for (let r = 0; r < 3; r++) for (const who of ["static", "oidc"] as const) await round(who, false); // warm-up
  for (let r = 0; r < rounds; r++) {
    // Alternating which goes first, so neither always runs right after the other's garbage.
    for (const who of r % 2 === 0 ? (["static", "oidc"] as const) : (["oidc", "static"] as const)) await round(who, true);
  }
  console.log(`${PROJECTS} projects, ${deploymentCount} deployments, ${rounds} rounds per credential (the caller sees every project)`);
  for (const call of ["list", "get"] as const) {
    const s = samples.static[call];
    const o = samples.oidc[call];
    console.log(
      `${call === "list" ? "ListDeployments (a page of 1,000)" : "GetDeployment"}: static p50 ${fmtMs(percentile(s, 50))} p99 ${fmtMs(percentile(s, 99))}; ` +
        `OIDC p50 ${fmtMs(percentile(o, 50))} p99 ${fmtMs(percentile(o, 99))}; OIDC/static p50 ${fmtRatio(percentile(o, 50) / percentile(s, 50))} p99 ${fmtRatio(percentile(o, 99) / percentile(s, 99))} (${s.length} and ${o.length} calls)`,
    );
  }
  // What a verification costs when it is not cached: fresh tokens (each unseen), in this process.
  const verifier = new OidcVerifier({ issuer: idp.issuer, audiences: [BENCH_CLIENT_ID] });
  await verifier.verify(idp.token("warm", ["g0"]));
  const tokens = Array.from({ length: 2000 }, (_, i) => idp.token(`u${i}`, ["g0", "g1"]));
  const costs: number[] = [];
  for (const token of tokens) {
    const t0 = now();
    await verifier.verify(token);
    costs.push(now() - t0);
  }
  console.log(
    `OidcVerifier.verify of an unseen ES256 token: p50 ${(percentile(costs, 50) * 1000).toFixed(0)} µs, p99 ${(percentile(costs, 99) * 1000).toFixed(0)} µs (${costs.length} tokens); ctrl pays it once per token and key-set period, then a cache hit`,
  );
} finally {
  await ctrl?.stop();
  await db.drop();
  idp.close();
}
