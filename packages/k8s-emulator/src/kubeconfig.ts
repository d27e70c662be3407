// A kubeconfig for the emulator. The client refuses plain http unless the
// cluster has insecure-skip-tls-verify set, hence that flag.

export function kubeconfigYaml(server: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: emulator',
    '  cluster:',
    `    server: ${JSON.stringify(server)}`,
    '    insecure-skip-tls-verify: true',
    'users:',
    '- name: emulator',
    '  user:',
    '    token: emulator-token',
    'contexts:',
    '- name: emulator',
    '  context:',
    '    cluster: emulator',
    '    user: emulator',
    '    namespace: default',
    'current-context: emulator',
    'preferences: {}',
    '',
  ].join('\n');
}
