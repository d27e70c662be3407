// A deployment's service fields, read-only, in the words `flotilla describe` uses: probes, the
// disruption budget, surge, grace, pod labels and annotations, env references, each region's env
// values, secret env by name, set and fingerprint (a response never holds a value), autoscaling
// per region with the autoscaler's replicas once reported.
import type { Deployment, RegionStatus } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import {
  autoscalerReplicasText,
  autoscalingText,
  budgetText,
  envFromText,
  envText,
  graceText,
  probesOf,
  probeText,
  secretText,
  surgeText,
  valueFromText,
} from "@flotilla/cli/workload-text";
import { html } from "htm/preact";

const pairs = (map: Record<string, string>) =>
  Object.entries(map)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${v}`)
    .join(", ");

export function ServiceFields({ deployment, statuses }: { deployment: Deployment; statuses: RegionStatus[] }) {
  const d = deployment;
  const references = [
    ...d.envFrom.map(envFromText),
    ...d.env.flatMap((e) => {
      const from = valueFromText(e);
      return from === undefined ? [] : [`${e.name} from ${from}`];
    }),
  ];
  const facts = (
    [
      ["Disruption budget", budgetText(d.disruptionBudget)],
      ["Rolling update", surgeText(d.maxSurge, d.maxUnavailable)],
      ["Termination grace", graceText(d.terminationGracePeriodSeconds)],
      ["Pod labels", pairs(d.podLabels) || undefined],
      ["Pod annotations", pairs(d.podAnnotations) || undefined],
      ["Env references", references.join("; ") || undefined],
    ] as [string, string | undefined][]
  ).filter((f): f is [string, string] => f[1] !== undefined);
  const probes = probesOf(d);
  const autoscaled = d.regions.filter((p) => p.autoscaling !== undefined);
  const regionEnv = d.regions.filter((p) => p.env.length > 0);
  if (facts.length + probes.length + regionEnv.length + d.secretEnv.length + autoscaled.length === 0) return null;
  return html`<h3>Service</h3>
    ${facts.length > 0 ? html`<dl class="facts">${facts.map(([term, value]) => html`<dt>${term}</dt><dd>${value}</dd>`)}</dl>` : ""}
    ${
      probes.length > 0
        ? html`<table class="service"><caption>Probes</caption>
            <thead><tr><th scope="col">Probe</th><th scope="col">Check</th></tr></thead>
            <tbody>${probes.map(([kind, probe]) => html`<tr data-probe=${kind}><th scope="row">${kind}</th><td>${probeText(probe)}</td></tr>`)}</tbody>
          </table>`
        : ""
    }
    ${
      regionEnv.length > 0
        ? html`<table class="service"><caption>Env by region</caption>
            <thead><tr><th scope="col">Region</th><th scope="col">Env</th></tr></thead>
            <tbody>${regionEnv.map((p) => html`<tr data-region-env=${p.region}><th scope="row">${p.region}</th><td>${p.env.map(envText).join(", ")}</td></tr>`)}</tbody>
          </table>`
        : ""
    }
    ${
      d.secretEnv.length > 0
        ? html`<table class="service"><caption>Secret env (values are never shown)</caption>
            <thead><tr><th scope="col">Name</th><th scope="col">Value</th></tr></thead>
            <tbody>${d.secretEnv.map((s) => html`<tr data-secret=${s.name}><th scope="row">${s.name}</th><td>${secretText(s)}</td></tr>`)}</tbody>
          </table>`
        : ""
    }
    ${
      autoscaled.length > 0
        ? html`<table class="service"><caption>Autoscaling</caption>
            <thead><tr><th scope="col">Region</th><th scope="col">Autoscaler</th><th scope="col">Replicas</th></tr></thead>
            <tbody>${autoscaled.map(
              (p) =>
                html`<tr data-autoscaling=${p.region}><th scope="row">${p.region}</th><td>${autoscalingText(p.autoscaling!)}</td><td>${autoscalerReplicasText(statuses.find((s) => s.region === p.region)) ?? "not reported yet"}</td></tr>`,
            )}</tbody>
          </table>`
        : ""
    }`;
}
