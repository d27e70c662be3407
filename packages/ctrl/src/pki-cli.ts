// `pnpm pki`: certificates for getting started with TLS and mTLS (see pki.ts).
import { parseArgs } from "node:util";
import { DEFAULT_TRUST_DOMAIN, DEFAULT_VALIDITY_DAYS, initPki, issueAgent, issueServer, pkiFiles } from "./pki.ts";
import { positiveInt } from "./config.ts";
import { writeSecretsKeyFile } from "./secrets-key-file.ts";

const USAGE = `usage: pnpm pki <command> [options]

For getting started only: a throw-away certificate authority in a directory, with ctrl's
server certificate and per-region agent client certificates. Use your own PKI in production
(any CA works: ctrl needs --tls-cert/--tls-key, --client-ca; agents a certificate whose URI
SAN is spiffe://<trust-domain>/region/<region>). Needs the openssl command.

commands:
  init               make a CA (ca.pem, ca.key) and ctrl's server certificate (ctrl.pem, ctrl.key)
                     for localhost, 127.0.0.1, ::1 and every --host
  issue-server       re-issue ctrl's server certificate (e.g. for new --host names)
  issue-agent        issue agent-<region>.pem/.key for --region
  secrets-key        make ctrl's secrets key file (--file, owner-only) with one fresh data key;
                     with --add, append a new newest key to it (then: pnpm secrets rotate)

options:
  --dir <path>           default .flotilla/pki
  --host <name or IP>    extra server name (repeatable)
  --region <name>        the agent's region (issue-agent)
  --trust-domain <name>  default ${DEFAULT_TRUST_DOMAIN}
  --days <n>             validity, default ${DEFAULT_VALIDITY_DAYS}
  --file <path>          the secrets key file (secrets-key), default .flotilla/secrets-key.json
  --add                  append a key to an existing secrets key file
  --help
`;

try {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      dir: { type: "string", default: ".flotilla/pki" },
      host: { type: "string", multiple: true, default: [] },
      region: { type: "string" },
      "trust-domain": { type: "string", default: DEFAULT_TRUST_DOMAIN },
      days: { type: "string", default: String(DEFAULT_VALIDITY_DAYS) },
      file: { type: "string", default: ".flotilla/secrets-key.json" },
      add: { type: "boolean" },
      help: { type: "boolean" },
    },
  });
  const [command] = positionals;
  if (values.help || !command) {
    process.stdout.write(USAGE);
    process.exit(values.help ? 0 : 2);
  }
  const days = positiveInt("days", values.days);
  if (command === "init") {
    const files = initPki(values.dir, values.host, { days });
    console.log(`CA ${files.caCert}, ctrl certificate ${files.serverCert} (key ${files.serverKey})`);
  } else if (command === "issue-server") {
    const files = issueServer(values.dir, values.host, { days });
    console.log(`ctrl certificate ${files.cert} (key ${files.key}), CA ${pkiFiles(values.dir).caCert}`);
  } else if (command === "issue-agent") {
    if (!values.region) throw new Error("--region is required");
    const files = issueAgent(values.dir, values.region, values["trust-domain"], { days });
    console.log(`agent certificate ${files.cert} (key ${files.key}), CA ${pkiFiles(values.dir).caCert}`);
  } else if (command === "secrets-key") {
    const id = writeSecretsKeyFile(values.file, values.add === true);
    console.log(`secrets key ${id} in ${values.file}: pass it to ctrl as --secrets-key-file`);
  } else {
    throw new Error(`unknown command ${JSON.stringify(command)}\n\n${USAGE}`);
  }
} catch (error) {
  console.error(`pki: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
