// `node packages/dev-idp/src/main.ts`: the local OpenID provider of `pnpm start --sso` (a
// development tool, never for production): demo users alice/alice (group team-a) and bob/bob
// (group team-b), the console client's secret read from a file.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { DEFAULT_IDP_PORT, DevIdp } from "./index.ts";

const { values } = parseArgs({
  options: {
    listen: { type: "string", default: `127.0.0.1:${DEFAULT_IDP_PORT}` },
    "client-secret-file": { type: "string" },
    "redirect-uri": { type: "string", multiple: true, default: [] },
  },
});
const fail = (message: string): never => {
  console.error(`dev-idp: ${message}`);
  process.exit(2);
};
const [host, port] = values.listen.split(/:(?=\d+$)/);
if (!host || !port) fail(`--listen ${JSON.stringify(values.listen)}: expected host:port`);
if (!values["client-secret-file"]) fail("--client-secret-file is required (the console client's secret)");
let secret = "";
try {
  secret = readFileSync(values["client-secret-file"]!, "utf8").trim();
} catch (error) {
  fail(`--client-secret-file: cannot read it (${(error as NodeJS.ErrnoException).code})`);
}
const idp = await new DevIdp({ host, port: Number(port), consoleSecret: secret, redirectUris: values["redirect-uri"] }).start();
console.log(`dev-idp ready: issuer ${idp.issuer}; users alice (password alice, group team-a) and bob (password bob, group team-b)`);
const stop = () => void idp.stop().then(() => process.exit(0));
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
