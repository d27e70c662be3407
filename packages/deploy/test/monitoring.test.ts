// deploy/monitoring: every metric name the Grafana dashboard and the Prometheus alert rules
// use exists on the /metrics of a running ctrl or agent; every alert links its runbook.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "yaml";
import { spawnCtrl } from "@flotilla/testkit/ctrl-process";
import { headingAnchors } from "@flotilla/testkit/docs";
import { mainOf, operatorClients, REPO_ROOT, startProcess } from "./processes.ts";

const ADMIN_TOKEN = "monitoring-test-admin-token";

// PromQL words that are not metric names.
const KEYWORDS = new Set(["by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf", "nan"]);

/** The metric names a PromQL expression selects. */
export function metricNames(expression: string): string[] {
  const stripped = expression
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""') // strings
    .replace(/\{[^}]*\}/g, "") // label matchers
    .replace(/\[[^\]]*\]/g, "") // ranges and subqueries
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ""); // label lists
  const names = new Set<string>();
  for (const [, name, call] of stripped.matchAll(/(?<![\w:$.])([a-zA-Z_:][\w:]*)(\s*\()?/g)) {
    if (!call && !KEYWORDS.has(name!.toLowerCase())) names.add(name!);
  }
  return [...names];
}

/** Every name a Prometheus text exposition defines: its samples, and its TYPE lines (a histogram's as _bucket, _sum, _count). */
function exposedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split("\n")) {
    const type = /^# TYPE (\S+) (\w+)/.exec(line);
    if (type) {
      const [, name, kind] = type;
      names.add(name!);
      if (kind === "histogram" || kind === "summary") for (const suffix of ["_bucket", "_sum", "_count"]) names.add(name! + suffix);
    } else if (line && !line.startsWith("#")) names.add(/^[^{\s]+/.exec(line)![0]);
  }
  return names;
}

test("metricNames reads the names out of PromQL", () => {
  assert.deepEqual(
    metricNames(
      'histogram_quantile(0.99, sum by (le, procedure) (rate(a_seconds_bucket{procedure!~"x(y)"}[$__rate_interval]))) / on (job) group_left b_total offset 5m and time() - c > 60',
    ),
    ["a_seconds_bucket", "b_total", "c"],
  );
});

test("every alert has a runbook_url naming a section of a docs page that exists", () => {
  const rules = parse(readFileSync(join(REPO_ROOT, "deploy/monitoring/alerts.yaml"), "utf8")) as {
    groups: { rules: { alert: string; annotations?: { runbook_url?: string } }[] }[];
  };
  const problems: string[] = [];
  for (const rule of rules.groups.flatMap((group) => group.rules)) {
    const url = rule.annotations?.runbook_url;
    const [page, section] = url?.split("#") ?? [];
    if (!url || !page || !section || !/^docs\/.+\.md$/.test(page))
      problems.push(`${rule.alert}: runbook_url ${JSON.stringify(url)} is not docs/<page>.md#<section>`);
    else if (!existsSync(join(REPO_ROOT, page))) problems.push(`${rule.alert}: ${page} does not exist`);
    else if (!headingAnchors(readFileSync(join(REPO_ROOT, page), "utf8")).has(section)) problems.push(`${rule.alert}: ${page} has no section #${section}`);
  }
  assert.deepEqual(problems, []);
});

test("every metric the dashboard and the alerts use exists on ctrl's or the agent's /metrics", { timeout: 60_000 }, async (t) => {
  const dashboard = JSON.parse(readFileSync(join(REPO_ROOT, "deploy/monitoring/dashboard.json"), "utf8")) as {
    panels: { title: string; targets?: { expr: string }[] }[];
  };
  const rules = parse(readFileSync(join(REPO_ROOT, "deploy/monitoring/alerts.yaml"), "utf8")) as { groups: { rules: { alert: string; expr: string }[] }[] };
  const used = new Map<string, string>(); // metric name → where it is used
  for (const panel of dashboard.panels)
    for (const target of panel.targets ?? []) for (const name of metricNames(target.expr)) used.set(name, `dashboard panel "${panel.title}"`);
  for (const group of rules.groups) for (const rule of group.rules) for (const name of metricNames(rule.expr)) used.set(name, `alert ${rule.alert}`);
  const alerts = rules.groups.flatMap((group) => group.rules.map((rule) => rule.alert));
  assert.deepEqual(alerts.sort(), ["FlotillaAgentStale", "FlotillaApplyErrors", "FlotillaChangeLag", "FlotillaNoLeader", "FlotillaQueueStalled"]);

  const dir = mkdtempSync(join(tmpdir(), "flotilla-monitoring-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const ctrl = await spawnCtrl(`sqlite:${join(dir, "ctrl.db")}`, ADMIN_TOKEN);
  t.after(() => ctrl.kill());
  const { regions } = operatorClients(ctrl.url, ADMIN_TOKEN);
  await regions.createRegion({ region: { name: "east" } });
  const { token } = await regions.createAgentToken({ region: "east" });
  const agent = startProcess(
    ["node", mainOf("agent"), "--ctrl-url", ctrl.url, "--region", "east", "--target", "render", "--render-dir", join(dir, "render"), "--listen", "127.0.0.1:0"],
    { env: { FLOTILLA_AGENT_TOKEN: token }, cwd: dir },
  );
  t.after(() => agent.stop());
  const [, agentUrl] = await agent.waitFor(/health and metrics on (http:\/\/[^\s,]+)/);

  const exposed = new Set<string>();
  for (const url of [ctrl.url, agentUrl!]) for (const name of exposedNames(await (await fetch(`${url}/metrics`)).text())) exposed.add(name);
  const missing = [...used].filter(([name]) => !exposed.has(name)).map(([name, where]) => `${name} (${where})`);
  assert.deepEqual(missing, [], "metrics used but exposed by neither ctrl nor the agent");
  assert.ok(used.size >= 10, "the check saw the dashboard's and the rules' metrics");
});

/** The metric names that have at least one sample (not only a TYPE line). */
function sampledNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split("\n")) if (line && !line.startsWith("#")) names.add(/^[^{\s]+/.exec(line)![0]);
  return names;
}

test("a fresh agent exports every series the dashboard and the alerts use before any work, at zero", { timeout: 60_000 }, async (t) => {
  const dashboard = JSON.parse(readFileSync(join(REPO_ROOT, "deploy/monitoring/dashboard.json"), "utf8")) as { panels: { targets?: { expr: string }[] }[] };
  const rules = parse(readFileSync(join(REPO_ROOT, "deploy/monitoring/alerts.yaml"), "utf8")) as { groups: { rules: { expr: string }[] }[] };
  const expressions = [
    ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((target) => target.expr)),
    ...rules.groups.flatMap((g) => g.rules.map((r) => r.expr)),
  ];
  // The agent's series; the leader-election ones exist once --leader-elect is on (a Lease to elect on).
  const agentSeries = [...new Set(expressions.flatMap(metricNames))].filter((name) => /^(flotilla_agent_|workqueue_)/.test(name) && !name.includes("leader"));
  const dir = mkdtempSync(join(tmpdir(), "flotilla-monitoring-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // ctrl unreachable: the agent does no work at all.
  const agent = startProcess(
    [
      "node",
      mainOf("agent"),
      "--ctrl-url",
      "http://127.0.0.1:1",
      "--region",
      "east",
      "--target",
      "render",
      "--render-dir",
      join(dir, "render"),
      "--listen",
      "127.0.0.1:0",
    ],
    { env: { FLOTILLA_AGENT_TOKEN: "flt_agent_unused" }, cwd: dir },
  );
  t.after(() => agent.stop());
  const [, agentUrl] = await agent.waitFor(/health and metrics on (http:\/\/[^\s,]+)/);
  const text = await (await fetch(`${agentUrl}/metrics`)).text();
  const sampled = sampledNames(text);
  assert.deepEqual(
    agentSeries.filter((name) => !sampled.has(name)),
    [],
    "series the dashboard or the alerts use that a fresh agent does not export yet",
  );
  assert.ok(agentSeries.length >= 5, `the check saw the agent's series: ${agentSeries.join(", ")}`);
  assert.match(text, /^workqueue_adds_total\{name="agent"\} 0$/m, "client-go's convention: zero from the start");
  assert.match(text, /^flotilla_agent_drift_corrections_total\{type="deployment",reason="orphan"\} 0$/m);
});
