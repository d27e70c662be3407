// A kubeconfig for the emulator. The client refuses plain http unless the
// cluster has insecure-skip-tls-verify set, hence that flag. Its token is the admin's
// (system:masters), which RBAC, when on, allows everything, unless another is given.
import { ADMIN_TOKEN } from "./auth.ts";

export function kubeconfigYaml(server: string, token = ADMIN_TOKEN): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: emulator",
    "  cluster:",
    `    server: ${JSON.stringify(server)}`,
    "    insecure-skip-tls-verify: true",
    "users:",
    "- name: emulator",
    "  user:",
    `    token: ${token}`,
    "contexts:",
    "- name: emulator",
    "  context:",
    "    cluster: emulator",
    "    user: emulator",
    "    namespace: default",
    "current-context: emulator",
    "preferences: {}",
    "",
  ].join("\n");
}
