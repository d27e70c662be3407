// The metrics page: every metric ctrl's and the agent's registries hold, read from fresh
// instances of their metric classes (name, type, labels, help), so nothing is listed by hand.
import { CtrlMetrics } from "@flotilla/ctrl/metrics";
import { AgentMetrics } from "@flotilla/agent";
import { cell, generatedHeader, table } from "./markdown.ts";

// prom-client is theirs, not a dependency of the scripts: its type through theirs.
type Registry = CtrlMetrics["registry"];

/** prom-client's default metrics (process_*, nodejs_*): one line, not one row each. */
const DEFAULT_METRIC = /^(?:process_|nodejs_)/;

async function metricRows(registry: Registry): Promise<string[][]> {
  const rows: string[][] = [];
  for (const { name, help, type } of await registry.getMetricsAsJSON()) {
    if (DEFAULT_METRIC.test(name)) continue;
    // prom-client keeps the label names on the metric object, not in its JSON.
    const { labelNames = [] } = registry.getSingleMetric(name) as unknown as { labelNames?: string[] };
    rows.push([`\`${name}\``, String(type), labelNames.map((l) => `\`${l}\``).join(", "), cell(help)]);
  }
  return rows.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

export async function metricsPage(): Promise<string> {
  const header = ["Metric", "Type", "Labels", "Meaning"];
  return [
    generatedHeader("Metrics", "the metric classes of packages/ctrl/src/metrics.ts and packages/agent/src/metrics.ts"),
    "Both processes serve Prometheus text on `/metrics` (ctrl on its port, or on `--metrics-listen`; the agent on `--listen`), with prom-client's default `process_*` and `nodejs_*` metrics beside the ones below. The dashboard and alerts that use them are in `deploy/monitoring/` ([Monitoring](../guides/monitoring.md)).",
    "",
    "## ctrl",
    "",
    table(header, await metricRows(new CtrlMetrics().registry)),
    "",
    "## The agent",
    "",
    "The work queue's and the Kubernetes client's metrics carry client-go's names, so dashboards made for Kubernetes controllers chart them.",
    "",
    table(header, await metricRows(new AgentMetrics().registry)),
    "",
  ].join("\n");
}
