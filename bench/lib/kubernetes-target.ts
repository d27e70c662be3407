// The agent's kubernetes target for a kubeconfig file, as the agent's CLI builds it: the one place
// where the benchmarks construct the agent's Kubernetes client. Imported on demand, so a process
// that renders does not load it.
import type { Target } from "@flotilla/agent";

export async function kubernetesTarget(kubeconfig: string, region: string): Promise<Target> {
  const { KubernetesTarget, KubeClient, loadKubeConnection } = await import("@flotilla/agent/kubernetes");
  return new KubernetesTarget({ kubeClient: new KubeClient(await loadKubeConnection({ kubeconfig })), region });
}
